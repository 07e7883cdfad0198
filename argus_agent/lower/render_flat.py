"""Kernels on flat indices: a Pointwise kernel walks the flat output in BLOCK-sized tiles; a generic
Reduction kernel (any index maps, i64 indices where needed) holds a (BM, BR) tile of (output, reduction)
pairs and loops over the reduction in BR steps, computing what does not depend on the reduction index once,
before the loop.

Kernels take every tensor flat (1-D, static size); element reads are window loads where the read index is
the kernel's own flat index, and gathers (index-tile loads) everywhere else.
"""

from __future__ import annotations

import dataclasses

from . import tags as lower_tags
from . import values as vals
from .core import Pointwise, Reduction
from .emit import _COMBINE, _FINAL, _init_literal, _is_tile, _PointwiseEmitter, _ReductionEmitter, _tp, _view_signature
from .index import Sum, Var, substitute
from .sizes import INT32_MAX, next_pow2
from .values import V, walk


def _kernel_params(kernel) -> tuple[list, dict]:
    """The buffers a kernel reads (its epilogue's too), and their parameter names (the buffers' own)."""
    used = []
    epilogue = getattr(kernel, "epilogue", None)
    for v in walk([kernel.value] + ([epilogue[1]] if epilogue is not None else [])):
        if v.op in ("load", "gather") and v.args[0] not in used:
            used.append(v.args[0])
    names = {b: b for b in used + [kernel.out.name]}
    return used, names


def _signature(em, kernel, buffers) -> tuple[list, list]:
    """Kernel parameters and the host's launch arguments, from what the emitter read, then the output."""
    return _view_signature(em, [(kernel.out.name, None)], buffers)


def render_pointwise(k: Pointwise, kname: str, buffers: dict) -> tuple[str, list, dict]:
    n = max(1, k.out.numel)
    used, names = _kernel_params(k)
    idt = "i64" if n > INT32_MAX or any(buffers[b].numel > INT32_MAX for b in used) else "i32"
    block = min(1024, max(32, next_pow2(n)))
    em = _PointwiseEmitter(names, idt, n, {b: buffers[b].dtype for b in buffers})
    em.sizes = {b: max(1, buffers[b].numel) for b in buffers}
    value = em.value(k.value)
    store = value if _is_tile(k.value) else f"tp.full((BLOCK,), {value}, {_tp(k.value.dtype)})"
    out_dt = k.out.dtype
    if vals.compute_dtype(out_dt) != k.value.dtype or vals.compute_dtype(out_dt) != out_dt:
        store = f"{store}.to({_tp(out_dt)})"
    body = ["i0 = tp.block_id(0) * BLOCK"]
    if idt == "i64":
        body.append("i = i0.to(tp.i64) + tp.arange(BLOCK).to(tp.i64)")
    else:
        body.append("i = i0 + tp.arange(BLOCK)")
    body += em.lines
    body.append(f"tp.store({names[k.out.name]}[i0:i0 + BLOCK], {store})")
    body = lower_tags.annotate_pointwise(body, em, n)
    params, args = _signature(em, k, buffers)
    src = (
        f"@tp.kernel(threads=128)\n"
        f"def {kname}({', '.join(params)}, BLOCK: tp.constexpr = {block}):\n"
        + (f"    # {k.what}\n" if k.what else "")
        + "".join(f"    {line}\n" for line in body)
    )
    grid = f"lambda m: (tp.cdiv({n}, m['BLOCK']),)"
    return src, args, {"grid": grid}


def _gather_steps_with_m(off: V) -> bool:
    """A gather offset `static + data` whose static part steps by 1 with the output m (m itself, or m mod n:
    the column of a gathered row) and does not move with r, which only reaches it through loaded data."""
    from .index import Mod

    if off.op != "add" or "r" not in off.vars:
        return False
    static = [a for a in off.args if a.op == "index"]
    if len(static) != 1 or "r" in static[0].vars:
        return False
    e = static[0].args[0]
    for c, a in e.terms if isinstance(e, Sum) else [(1, e)]:
        if c == 1 and (isinstance(a, Var) and a.name == "m" or isinstance(a, Mod) and isinstance(a.x, Var)
                       and a.x.name == "m"):
            return True
    return False


def _column_reduction(value: V) -> bool:
    """Whether the reduction's main loads step by 1 along the outputs but not along the reduced index.
    (Pooling windows, whose offsets are div/mod terms of r, stay (BM, BR): outputs along the fast axis measured
    1.3-3x slower on the H100 for max pools, benchmarks/results/suite-pool-*.json.)"""
    votes = 0
    for v in walk([value]):
        if v.op == "gather" and "r" in v.vars and _gather_steps_with_m(v.args[1]):
            votes += 2      # a row gathered by a run-time index (an embedding table): its columns are the outputs
            # (outweighs the index load stepping with r: one index serves a whole row of outputs)
            continue
        if v.op != "load" or not isinstance(v.args[1], Sum):
            continue
        coef = {a.name: c for c, a in v.args[1].terms if isinstance(a, Var)}
        if "r" in v.vars:
            if coef.get("m") == 1 and coef.get("r", 0) != 1:
                votes += 1
            elif coef.get("r") == 1:
                votes -= 1
    return votes > 0


def render_reduction(k: Reduction, kname: str, buffers: dict) -> tuple[str, list, dict]:
    M, R = k.M, k.R
    if k.mode == "col":   # a column-mode reduction rendered flat (i64 indices): its (o, i) as the flat m
        from .index import floordiv, mod
        from .program import _subst

        m = Var("m", M)
        to_m = {"o": floordiv(m, k.I), "i": mod(m, k.I)}
        epi = k.epilogue
        if epi is not None:     # (out buffer, value, index of the result in value, store the result too?)
            epi = (epi[0], _subst(epi[1], to_m), substitute(epi[2], to_m), epi[3])
        k = dataclasses.replace(k, value=_subst(k.value, to_m), epilogue=epi)
    used, names = _kernel_params(k)
    idt = "i64" if M * R > INT32_MAX or any(buffers[b].numel > INT32_MAX for b in used) else "i32"
    final = _FINAL[k.kind]
    cols = _column_reduction(k.value)
    if cols and final is not None:
        # the outputs are contiguous in memory, the reduced index strided: outputs along the tile's fast axis
        bm = min(next_pow2(M), 128)
        br = max(1, min(next_pow2(R), 2048 // bm, 32))
    else:
        br = 1 if final is None else min(next_pow2(R), 256 if M > 1 else 1024)
        bm = max(1, min(next_pow2(M), max(1, 2048 // br)))
    dtype = k.value.dtype
    em = _ReductionEmitter(names, idt, {b: buffers[b].dtype for b in buffers}, M, R,
                           {b: max(1, buffers[b].numel) for b in buffers})
    em.cols = cols and final is not None
    mx, rx = ("[None, :]", "[:, None]") if em.cols else ("[:, None]", "[None, :]")
    tile = "(BR, BM)" if em.cols else "(BM, BR)"
    axis = 0 if em.cols else 1
    # values that do not depend on the reduction index: computed once, before the loop
    order = walk([k.value])
    pre = [v for v in order if "r" not in v.vars and v.op not in ("const",)]
    for v in pre:
        em.value(v)
    pre_lines = em.lines
    em.lines = []
    val = em.value(k.value)
    loop_lines = em.lines
    acc_t = _tp(dtype)
    init = _init_literal(k.kind, dtype)
    body = ["m0 = tp.block_id(0) * BM"]
    cast = ".to(tp.i64)" if idt == "i64" else ""
    body.append(f"m = (m0{'.to(tp.i64)' if idt == 'i64' else ''} + tp.arange(BM){cast}){mx}")
    body += pre_lines
    body.append(f"acc = tp.full({tile}, {init}, {acc_t})")
    inner = [f"r = (k * BR + tp.arange(BR){cast}){rx}"] + loop_lines
    v_text = val if _is_tile(k.value) else f"tp.full({tile}, {val}, {acc_t})"
    inner.append(f"acc = tp.where((m < M) & (r < R), {_COMBINE[k.kind].format(a='acc', b=v_text)}, acc)")
    one = -(-R // br) == 1
    if one:     # one chunk: straight-line, so the accumulator's tags are the verifier's to follow
        body += ["k = 0"] + inner
    else:
        body.append("for k in range(tp.cdiv(R, BR)):")
        body += ["    " + line for line in inner]
    out_views = [(k.out.name, None)]
    if k.epilogue is not None and final is not None:
        body, out_views = _generic_epilogue(k, em, body, final, axis, dtype)
    else:
        if final is None:
            body.append(f"res = tp.sum(acc, axis={axis})")  # BR == 1: the column is the result
        else:
            body.append(f"res = {final}(acc, axis={axis})")
        out_dt = k.out.dtype
        res = "res" if vals.compute_dtype(out_dt) == dtype == out_dt else f"res.to({_tp(out_dt)})"
        body.append(f"tp.store({names[k.out.name]}[m0:m0 + BM], {res})")
    if _is_tile(k.value) and k.epilogue is None:
        # one chunk: each stored element the reduction of its tile; several: the fold of every chunk, once
        claim = lower_tags.reduction_store_assertion(k.value, names[k.out.name], ("m",), br,
                                                     lambda s: (None, (None, s), None),
                                                     fold=None if one else -(-R // br))
        if claim:
            body.insert(0, claim)
    body = lower_tags.annotate_reduction(body, em, M, R)
    params, args = _view_signature(em, out_views, buffers)
    src = (
        f"@tp.kernel(threads=128)\n"
        f"def {kname}({', '.join(params)}, M: tp.constexpr = {M}, R: tp.constexpr = {R}, "
        f"BM: tp.constexpr = {bm}, BR: tp.constexpr = {br}):\n"
        + (f"    # {k.what}\n" if k.what else "")
        + "".join(f"    {line}\n" for line in body)
    )
    grid = f"lambda m: (tp.cdiv({M}, m['BM']),)"
    return src, args, {"grid": grid}


def _generic_epilogue(k: Reduction, em, body: list, final: str, axis: int, dtype):
    """The end of a generic reduction whose outputs feed a per-output pointwise epilogue (an average pool's
    window count, a mean's division): the result kept as a (BM, 1) / (1, BM) tile beside the loop's `m`,
    the epilogue computed on it and stored (the result too when others read it) through 2-D views of the
    flat outputs: one pass instead of a reduction and a pointwise kernel."""
    out_buf, value, key, store_res = k.epilogue     # (a column-mode one's already read as the flat m)
    body.append(f"res = {final}(acc, axis={axis}, keepdims=True)")
    if vals.compute_dtype(k.out.dtype) != k.out.dtype:      # read back from a half buffer: round as stored
        body.append(f"res = res.to({_tp(k.out.dtype)}).to({_tp(dtype)})")
    em.done[vals.load(k.out.name, key, k.out.dtype)] = "res"
    em.lines = []
    val = em.value(value)
    body += em.lines
    shape, sub = ((1, k.M), "0:1, m0:m0 + BM") if em.cols else ((k.M, 1), "m0:m0 + BM, 0:1")
    tile = "(1, BM)" if em.cols else "(BM, 1)"
    v_text = val if _is_tile(value) else f"tp.full({tile}, {val}, {_tp(value.dtype)})"
    outs = []
    for buf, text, vdt in ([(k.out, "res", dtype)] if store_res else []) + [(out_buf, v_text, value.dtype)]:
        name = f"{buf.name}_2d"
        if vdt != buf.dtype:
            text = f"({text}).to({_tp(buf.dtype)})"
        body.append(f"tp.store({name}[{sub}], {text})")
        outs.append((buf.name, (name, shape)))
    return body, outs


def needs_i64(k, buffers) -> bool:
    """Whether a kernel's indices may pass int32 (then it takes the generic path, whose indices are i64)."""
    sizes = [k.M * k.R] + [buffers[v.args[0]].numel for v in walk([k.value]) if v.op in ("load", "gather")]
    return max(sizes) > INT32_MAX


