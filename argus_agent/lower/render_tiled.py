"""Row- and column-mode reductions as 2-D tiles, and the tile plumbing every tiled renderer shares.

A row-mode reduction (`mode == "row"`) holds a (BM, BR) tile of (output, reduction) pairs, one block per BM
outputs; a column-mode one (`mode == "col"`, outputs o * I + i, the reduced index strided) a (BR, BI) tile,
one block per (o, BI outputs). Both loop over their chunk of the reduction in BR steps, computing what does
not depend on the reduction index once, before the loop. Too few outputs to fill the GPU: the reduction is
split into S chunks of C elements, S partial results, and a second kernel combines them. A per-output
pointwise epilogue (a norm's scale, a mean's division) is computed on the result tile and stored with it.
"""

from __future__ import annotations

import dataclasses
import re

from . import tags as lower_tags
from . import values as vals
from .core import Buffer, Reduction
from .emit import _COMBINE, _FINAL, _init_literal, _is_tile, _TileEmitter, _tp, _view_signature
from .index import Var, add, scale
from .sizes import TARGET_BLOCKS, TILE_ELEMS, cdiv, next_pow2, threads_for
from .values import walk

# ---------------------------------------------------------------- shared by the tiled renderers


def _uses(lines, name) -> bool:
    pat = re.compile(rf"\b{name}\b")
    return any(pat.search(line) for line in lines)


def _kernel_src(kname, params, consts: dict, threads: int, what: str, body: list) -> str:
    cs = "".join(f", {k}: tp.constexpr = {v}" for k, v in consts.items())
    return (f"@tp.kernel(threads={threads})\n"
            f"def {kname}({', '.join(params)}{cs}):\n"
            + (f"    # {what}\n" if what else "")
            + "".join(f"    {line}\n" for line in body))


def _out_view(em, buf: Buffer, shape) -> tuple:
    shape = tuple(int(n) for n in shape)
    if len(shape) == 1:
        return buf.name, (buf.name, None)
    name = em.view(buf.name, shape)
    return name, (buf.name, (name, shape))


def tile_emitter(names: dict, buffers: dict, row: bool, sizes: dict, rblock: str = "BR") -> _TileEmitter:
    """The emitter of a row tile (m, r) or a column tile (r, i) with block-uniform o; `sizes` the loop
    variables' ranges."""
    dtypes = {b: buffers[b].dtype for b in buffers}
    numels = {b: max(1, buffers[b].numel) for b in buffers}
    if row:
        axes, scalars = (("m", "m0", "BM"), ("r", "r0", rblock)), ()
    else:
        axes, scalars = (("r", "r0", rblock), ("i", "i0", "BI")), ("o",)
    return _TileEmitter(names, "i32", dtypes, sizes, numels, axes, scalars)


def reduction_sizes(k, row: bool) -> dict:
    return {"m": k.M, "r": k.R} if row else {"o": k.O, "i": k.I, "r": k.R}


def hoist(em, roots) -> list:
    """Render what does not depend on the reduction index (computed once, before the loop): those lines;
    the emitter's lines start empty again."""
    for v in walk(roots):
        if "r" not in v.vars and v.op != "const":
            em.value(v)
    pre, em.lines = em.lines, []
    return pre


def block_start(row: bool, S: int, lines: list) -> list:
    """The block's output coordinates (and its split chunk s): only the index tiles `lines` use."""
    body = []
    if row:
        body.append("m0 = tp.block_id(0) * BM")
        if _uses(lines, "m"):
            body.append("m = (m0 + tp.arange(BM))[:, None]")
    else:
        body += ["pid = tp.block_id(0)", "o = pid // NI", "i0 = (pid % NI) * BI"]
        if _uses(lines, "i"):
            body.append("i = (i0 + tp.arange(BI))[None, :]")
    if S > 1:
        body.append("s = tp.block_id(1)")
    return body


def chunk_index(row: bool, S: int) -> list:
    """Step k of the loop over the block's chunk of the reduction: r0 and the reduction index tile r."""
    rx = "[None, :]" if row else "[:, None]"
    return [f"r0 = {'s * C + ' if S > 1 else ''}k * BR", f"r = (r0 + tp.arange(BR)){rx}"]


def loop_or_once(inner: list, trips: str, once: bool) -> list:
    """The loop over the reduction's chunks, or its one iteration as straight-line code (k = 0): the
    accumulator's tag is then the value's own (over a loop, the verifier's fold of the iterations)."""
    if once:
        return ["k = 0"] + inner
    return [f"for k in range({trips}):"] + ["    " + line for line in inner]


def reduction_consts(k, row: bool, bm: int, br: int, C: int, S: int) -> tuple[dict, str]:
    """The kernel's constexprs and the launch grid (BM-row blocks, or (o, BI) blocks; S chunks)."""
    consts = {"M": k.M, "R": k.R, "C": C}
    if row:
        consts.update(BM=bm, BR=br)
        return consts, f"lambda m: (tp.cdiv({k.M}, m['BM']), {S})"
    consts.update(O=k.O, I=k.I, NI=cdiv(k.I, bm), BI=bm, BR=br)
    return consts, f"lambda m: (tp.cdiv({k.I}, m['BI']) * {k.O}, {S})"


def store_result(em, buf: Buffer, k, row: bool, text: str, S: int = 1, keep: bool = False) -> tuple[str, tuple]:
    """The store of a per-output result `text` (1-D over the tile's outputs; `keep`: a (BM, 1) / (1, BI)
    tile) into `buf`, or of a split chunk's partial result: (line, output view)."""
    if S > 1:
        return _partial_store(em, buf, k, S, text)
    if row:
        shape, sub = ((k.M, 1), "m0:m0 + BM, 0:1") if keep else ((k.M,), "m0:m0 + BM")
    else:
        shape, sub = ((k.O, 1, k.I), "o, 0:1, i0:i0 + BI") if keep else ((k.O, k.I), "o, i0:i0 + BI")
    name, ov = _out_view(em, buf, shape)
    return f"tp.store({name}[{sub}], {text})", ov


def finish(em, body: list, outs: list, buffers: dict, kname: str, consts: dict, threads: int,
           what: str) -> tuple[str, list]:
    """Tags and assertions into `body`, then the kernel's source and its launch arguments."""
    body = lower_tags.annotate_tile(body, em)
    params, args = _view_signature(em, outs, buffers)
    return _kernel_src(kname, params, consts, threads, what, body), args


def _split_plan(k: Reduction) -> tuple:
    """(BM or BI, BR, S, C): the tile, and S chunks of C reduced elements when the outputs alone give too
    few blocks (a second kernel then combines the S partial results)."""
    E = TILE_ELEMS
    if k.mode == "row":
        br = min(next_pow2(k.R), E)
        bm = min(next_pow2(k.M), max(1, E // br))
        nblk = cdiv(k.M, bm)
    else:
        bm = min(next_pow2(k.I), 128)
        br = min(next_pow2(k.R), max(1, E // bm))
        nblk = cdiv(k.I, bm) * k.O
    S = 1
    if nblk < TARGET_BLOCKS and k.R >= 4 * br and not k.extra.get("no_split"):
        S = max(1, min(cdiv(TARGET_BLOCKS, nblk), k.R // (2 * br), 1024))
    C = cdiv(cdiv(k.R, S), br) * br
    return bm, br, cdiv(k.R, C), C


def _partial_layout(k: Reduction, S: int):
    """Where split partials live: (M, S) for rows, (O, S, I) for columns, and the combine kernel's index
    of them in the reduction's own loop variables (so the combine kernel keeps the geometry, and an
    epilogue's variables mean what they meant)."""
    r = Var("r", S)
    if k.mode == "row":   # (S, M): the store pattern of a row's partials; the small combine gathers them
        return (S, k.M), add(scale(r, k.M), Var("m", k.M))
    return (k.O, S, k.I), add(add(scale(Var("o", k.O), S * k.I), scale(r, k.I)), Var("i", k.I))


def _partial_store(em, buf, k, S, text) -> tuple[str, tuple]:
    """The first pass's store of its partial result `text` (1-D over the tile's outputs)."""
    if k.mode == "row":
        name, ov = _out_view(em, buf, (S, k.M))
        return f"tp.store({name}[s, m0:m0 + BM], {text})", ov
    name, ov = _out_view(em, buf, (k.O, S, k.I))
    return f"tp.store({name}[o, s, i0:i0 + BI], {text})", ov


# ---------------------------------------------------------------- sum / max / min / prod


def render_tiled_reduction(k: Reduction, kname: str, buffers: dict) -> tuple[list, list]:
    """A row- or column-mode reduction: [(source, kernel name, launch args, grid)], extra temp buffers."""
    bm, br, S, C = _split_plan(k)
    partial = None
    if S > 1:
        shape, pidx = _partial_layout(k, S)
        partial = Buffer(f"{k.out.name}_part", shape, k.value.dtype, "temp")
        buffers = dict(buffers, **{partial.name: partial})
    first = k if partial is None else dataclasses.replace(k, epilogue=None)
    src, args, grid = _tiled_kernel(first, kname, buffers, bm, br, S, C, partial)
    out = [(src, kname, args, grid)]
    if partial is None:
        return out, []
    second = dataclasses.replace(k, value=vals.load(partial.name, pidx, partial.dtype), R=S,
                                 extra=dict(k.extra, no_split=True))
    b2, r2, _, c2 = _split_plan(second)
    src2, args2, grid2 = _tiled_kernel(second, kname + "_combine", buffers, b2, r2, 1, c2, None)
    return out + [(src2, kname + "_combine", args2, grid2)], [partial]


def _tiled_kernel(k: Reduction, kname, buffers, bm, br, S, C, partial):
    row = k.mode == "row"
    names = {v.args[0]: v.args[0] for v in walk([k.value]) if v.op in ("load", "gather")}
    names[k.out.name] = k.out.name
    if partial:
        names[partial.name] = partial.name
    if k.epilogue is not None:
        names.update({v.args[0]: v.args[0] for v in walk([k.epilogue[1]]) if v.op in ("load", "gather")})
        names[k.epilogue[0].name] = k.epilogue[0].name
    em = tile_emitter(names, buffers, row, reduction_sizes(k, row))
    pre_lines = hoist(em, [k.value])
    val = em.value(k.value)
    loop_lines = em.lines
    dtype = k.value.dtype
    acc_t = _tp(dtype)
    tile = "(BM, BR)" if row else "(BR, BI)"
    v_text = val if _is_tile(k.value) else f"tp.full({tile}, {val}, {acc_t})"
    comb = _COMBINE[k.kind].format(a="acc", b=v_text)
    if S * C != k.R:
        comb = f"tp.where(r < R, {comb}, acc)"
    inner = chunk_index(row, S) + loop_lines
    inner.append(f"acc = {comb}")
    body = block_start(row, S, pre_lines + inner)
    body += pre_lines
    body.append(f"acc = tp.full({tile}, {_init_literal(k.kind, dtype)}, {acc_t})")
    one = cdiv(C, br) == 1
    body += loop_or_once(inner, "tp.cdiv(C, BR)", one)
    final = _FINAL[k.kind] or "tp.prod"
    if k.epilogue is not None:
        return _tiled_epilogue(k, kname, buffers, em, body, final, row, bm, br, C, one)
    body.append(f"res = {final}(acc, axis={1 if row else 0})")
    line, ov = store_result(em, partial if partial is not None else k.out, k, row, "res", S)
    if _is_tile(k.value):
        # what each stored element is the reduction of: one chunk (straight-line), or the fold of the chunk
        # loop (every chunk of the block's range, once); a split partial s covers [s C, s C + C)
        masked = S * C != k.R
        coords = ("m",) if row else ("o", "i")
        if partial is not None:
            coords = ("s", "m") if row else ("o", "s", "i")
        claim = lower_tags.reduction_store_assertion(
            k.value, line[len("tp.store("):line.index("[")], coords, br,
            (lambda s: (None, (None, s), None)) if masked else (lambda s: (None, s)),
            fold=None if one else cdiv(C, br), lo="s" if partial is not None else None)
        if claim:
            body.insert(0, claim)
    body.append(line)
    consts, grid = reduction_consts(k, row, bm, br, C, S)
    src, args = finish(em, body, [ov], buffers, kname, consts, threads_for(bm * br), k.what)
    return src, args, grid


def _tiled_epilogue(k, kname, buffers, em, body, final, row, bm, br, C, one=False):
    """The end of a tiled reduction whose outputs feed a per-output pointwise epilogue: the result as a
    (BM, 1) or (1, BI) tile, the epilogue computed on it and stored (the result too if others read it)."""
    out_buf, value, key, store_res = k.epilogue
    body.append(f"res = {final}(acc, axis={1 if row else 0}, keepdims=True)")
    dtype = k.value.dtype
    if vals.compute_dtype(k.out.dtype) != k.out.dtype:      # read back from a half buffer: round as stored
        body.append(f"res = res.to({_tp(k.out.dtype)}).to({_tp(dtype)})")
    em.done[vals.load(k.out.name, key, k.out.dtype)] = "res"
    em.lines = []
    val = em.value(value)
    # the epilogue may read the output's index tile (a gather at it) where the loop did not: define it
    idx, define = ("m", "m = (m0 + tp.arange(BM))[:, None]") if row else ("i", "i = (i0 + tp.arange(BI))[None, :]")
    if _uses(em.lines, idx) and not any(line.startswith(f"{idx} = ") for line in body):
        at = next(k for k, line in enumerate(body) if line.startswith(f"{idx}0 = "))
        body.insert(at + 1, define)
    body += em.lines
    tile = "(BM, 1)" if row else "(1, BI)"
    v_text = val if _is_tile(value) else f"tp.full({tile}, {val}, {_tp(value.dtype)})"
    outs = []
    for buf, text in ([(k.out, "res")] if store_res else []) + [(out_buf, v_text)]:
        line, ov = store_result(em, buf, k, row, text, keep=True)
        body.append(line)
        outs.append(ov)
        if _is_tile(k.value) and _is_tile(value):
            # the epilogue's value at the output index, the reduction read as its reduced set (one chunk) or
            # as the fold of its chunk loop
            wrap = (lambda s: (None, (None, s), None)) if C != k.R else (lambda s: (None, s))
            claim = lower_tags.row_fused_store_assertion(
                value if buf is out_buf else vals.load(k.out.name, key, k.out.dtype),
                {k.out.name: (k.value, wrap, key)}, line[len("tp.store("):line.index("[")],
                ("m", None) if row else ("o", None, "i"), br, fold=None if one else cdiv(C, br))
            if claim:
                body.insert(0, claim)
    consts, grid = reduction_consts(k, row, bm, br, C, 1)
    src, args = finish(em, body, outs, buffers, kname, consts, threads_for(bm * br), k.what)
    return src, args, grid

