"""Lower a captured core-ATen graph to kernels: walk the nodes, apply each op's lowering, realize outputs."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import torch
import torch.fx as fx

from . import ops_attention, ops_lines, ops_moe, ops_nn, ops_pointwise, ops_reduce, ops_rnn, ops_scatter, ops_views  # noqa: F401,E501  (registrations)
from . import values as vals
from .attention_match import find as find_attention
from .attention_match import lower as lower_attention
from .core import Buffer, Context, LTensor, Pointwise, Reduction, RowFused, Scan, buffer_tensor
from .dispatch import lower_node as _lower_node
from .graph import Captured, LoweringError, capture_program, source_line
from .values import STORAGE_OK

log = logging.getLogger("argus_agent.lower")


@dataclass
class LoweredProgram:
    """Kernels (Pointwise/Reduction specs) in launch order, the buffers they use, and the outputs."""

    captured: Captured
    buffers: list
    kernels: list
    outputs: list            # Buffer per graph output (realized, contiguous), with its shape
    output_shapes: list
    single_output: bool
    ops: list = field(default_factory=list)   # ATen ops of the reference (what ModelNew may not call)
    target: str = "cpu"
    placeholders: dict = field(default_factory=dict)   # graph input name -> Buffer
    precision: object = None  # precision.Precision: what fp32 matmuls and convolutions compute at


def lower_model(model: torch.nn.Module, inputs: list, target: str = "cpu", precision: str | None = None
                ) -> LoweredProgram:
    """torch.export `model(*inputs)`, decompose to core ATen, and lower every node (LoweringError otherwise).
    `target` picks template kernels (tensor-core GEMMs) where it has them; `precision` (fp32, tf32, bf16; None:
    PyTorch's settings, read now) is what fp32 matmuls and convolutions compute at (precision.py)."""
    from .precision import resolve

    prec = resolve(precision)      # read at capture time, as torch.compile does
    captured = capture_program(model, inputs)
    return lower_captured(captured, target, prec)


def lower_captured(captured: Captured, target: str = "cpu", precision=None) -> LoweredProgram:
    from .precision import resolve

    ep = captured.program
    ctx = Context(target)
    ctx.precision = precision if precision is not None and not isinstance(precision, str) else resolve(precision)
    env: dict = {}
    by_name = {gi.name: gi for gi in captured.inputs}
    ops = []
    placeholders: dict = {}
    out_node = None
    moe = ops_moe.find(captured, target)        # a routed-expert subgraph the stdlib MoE kernels compute
    if moe is not None and (why := ops_moe.plan(moe)) is not None:
        log.info("%s: MoE lowered op by op: %s", source_line(moe.out), why)
        moe = None
    attn = find_attention(captured, target)   # attention written out, computed by the stdlib kernels
    attn_live = set().union(*(m.live for m in attn.values()))
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            gi = by_name[node.name]
            val = node.meta.get("val")
            if not isinstance(val, torch.Tensor):
                env[node] = gi.value
                continue
            if gi.kind == "constant":
                env[node] = constant_tensor(gi.value)
                continue
            if val.dtype not in STORAGE_OK:
                raise LoweringError(f"input `{node.name}` has dtype {val.dtype}, which tilepy kernels do not take "
                                    "yet (supported: float32/16, bfloat16, float64, int8/32/64, bool)")
            kind = gi.kind
            buf = ctx.add_buffer(node.name, tuple(val.shape), val.dtype, kind,
                                 gi.index if kind == "input" else gi.target)
            env[node] = buffer_tensor(buf)
            placeholders[node.name] = buf
        elif node.op == "call_function":
            ops.append(str(node.target))
            if moe is not None and node not in moe.live:
                continue                          # consumed by the MoE template only
            if node in attn_live:
                continue                          # consumed by an attention template only
            if node in attn:
                env[node] = lower_attention(ctx, attn[node], env)
                continue
            if moe is not None and node is moe.out:
                ctx.note = f"MoE ({source_line(node)})"
                env[node] = ops_moe.lower(ctx, moe, env)
                continue
            env[node] = _shared_stored(ctx, node, _lower_node(ctx, node, env))
        elif node.op == "output":
            out_node = node
        elif node.op == "get_attr":
            raise LoweringError(f"{source_line(node)}: a tensor attribute read by get_attr is not lowered yet")
    results = out_node.args[0]
    single = ep.call_spec.out_spec.is_leaf()
    results = [results] if not isinstance(results, (tuple, list)) else list(results)
    outputs, shapes = [], []
    for r in results:
        t = env[r] if isinstance(r, fx.Node) else None
        if not isinstance(t, LTensor):
            raise LoweringError("Model.forward returns a value that is not a tensor")
        ctx.note = f"output {r.name}"
        plain = _plain_buffer(ctx, t)
        if plain is not None and plain.kind == "temp" and plain not in outputs:
            buf = plain
        else:
            buf = _force_realize(ctx, t, "out")
        outputs.append(buf)
        shapes.append(t.shape)
    kernels = fuse_rows(ctx.kernels, outputs)
    kernels = drop_dead(kernels, outputs)
    used = {b.name for k in kernels for b in kernel_buffers(k)} | {b.name for b in outputs}
    used |= set().union(set(), *[_reads(k) for k in kernels])
    used |= {nm for k in kernels if isinstance(k, RowFused) for nm in k.keep}
    buffers = [b for b in ctx.buffers if b.kind != "temp" or b.name in used]
    return LoweredProgram(captured, buffers, kernels, outputs, shapes, single, ops, ctx.target, placeholders,
                          ctx.precision)


# A value is composed into each kernel that consumes it (recomputed per kernel). One whose element reads more
# than SHARED_READS elements of large buffers (>= SHARED_BIG elements: not weights or BN statistics) and that
# reaches two or more kernels is stored once instead: a 5x5 depthwise convolution (25 taps) read by an SE
# block's mean and by its gating product was computed twice, 50 reads per element against 1 write and 2 reads.
SHARED_READS = 8
SHARED_BIG = 1 << 16
# A read whose address jumps where the value's innermost coordinate steps by one (a transposed view: ViT's
# `conv(x).flatten(2).transpose(1, 2)`) pulls a 32-byte sector per 4-byte element, 8 times the bytes of a read in
# order: one such read is reason enough, so a value reaching two or more kernels with it is stored once (coalesced)
# instead of gathered again in every kernel (level3/009's residual stream read the patch embedding transposed in
# each of its 10 consumers: its final LayerNorm alone took 833 us of the program's 3509).
STRIDED_READS = SHARED_READS + 1
# Ops that read their input twice, in their statistics and in their normalization (two kernels, or two passes of
# one row kernel): one such sink counts as two (ConvNeXt's 49-tap depthwise convolution feeding a LayerNorm was
# written out in its sum, its sum of squares and its normalization, 3 x 49 reads per element).
SINK_READS = {"aten.native_layer_norm.default": 2, "aten.native_group_norm.default": 2,
              "aten._native_batch_norm_legit.default": 2, "aten._native_batch_norm_legit_functional.default": 2}


def _sinks(node, limit: int = 64) -> set:
    """The nodes where `node`'s value leaves the kernel it is composed into: following users through
    pointwise ops and views (which compose into the same kernel), the first other op on each path (a
    reduction, a convolution, a matmul, the output). Stops counting past `limit` nodes visited."""
    out, seen, todo = set(), set(), list(node.users)
    while todo and len(seen) < limit:
        u = todo.pop()
        if u in seen:
            continue
        seen.add(u)
        op = u.target
        fuses = u.op == "call_function" and (getattr(op, "is_view", False)
                                             or torch.Tag.pointwise in getattr(op, "tags", ()))
        if fuses:
            todo.extend(u.users)
        else:
            out.add(u)
    return out


def _shared_stored(ctx: Context, node, t):
    """`t` (node's lowered value) realized into a buffer of its own when it reaches several kernels and each
    element is dear to recompute (see SHARED_READS); else `t` as it is."""
    if (not isinstance(t, LTensor) or t.buffer is not None or not t.shape or t.numel < SHARED_BIG
            or t.dtype not in STORAGE_OK or len(node.users) < 1):
        return t
    sinks = _sinks(node)
    if sum(SINK_READS.get(str(s.target), 1) for s in sinks) < 2:
        return t
    from .index import Var
    from .render_conv_copy import reads_per_element

    sizes = {b.name: b.numel for b in ctx.buffers}
    coords = [Var(f"i{d}", n) for d, n in enumerate(t.shape)]
    reads = reads_per_element(t(coords), sizes, big=SHARED_BIG, inner=coords[-1], strided=STRIDED_READS)
    if reads <= SHARED_READS:
        return t
    log.info("%s: stored once (%d reads of large buffers per element, read by %d kernels)", source_line(node),
             reads, len(sinks))
    return ctx.realize(t, "shared")


def constant_tensor(c: torch.Tensor) -> LTensor:
    """A small tensor constant made inside forward as values: element k of its flat order is the constant
    c[k] where k is known when lowering, else a select over the elements (no buffer, no host code)."""
    from .index import flatten, variables

    flat = c.reshape(-1).tolist()
    dtype = c.dtype
    shape = tuple(int(n) for n in c.shape)

    def fn(coords):
        e = flatten(list(coords), shape) if shape else None
        if e is None or not variables(e):
            return vals.const(flat[e.c if e is not None else 0], dtype)
        k = vals.index_value(e)
        out = vals.const(flat[-1], dtype)
        for j in range(len(flat) - 2, -1, -1):
            if flat[j] != flat[-1]:      # (a NaN never equals: it gets its own select)
                out = vals.call("where", vals.call("eq", k, vals.const(j, torch.int64)), vals.const(flat[j], dtype),
                                out, dtype=dtype)
        return out
    return LTensor(shape, dtype, fn)


def _plain_buffer(ctx: Context, t: LTensor):
    """The temp buffer `t` reads element for element in row-major order (a view that composes to the
    identity, e.g. a flip of a reversed scan), or None."""
    buf = ctx.whole_buffer(t)
    if buf is None:
        return None
    # a half buffer is taken as it is only from a kernel that stores that type itself (stdlib attention, a
    # realized value such as a bf16 matmul's result, whose Pointwise kernel may run as a GEMM's epilogue)
    if vals.compute_dtype(buf.dtype) != buf.dtype and not any(
            isinstance(k, (ops_attention.AttentionTemplate, ops_moe.MoeTemplate, Pointwise)) and k.out is buf
            for k in ctx.kernels):
        return None
    return buf


def kernel_buffers(k) -> list:
    """Every Buffer a kernel spec reads or writes."""
    out = []
    if isinstance(k, Reduction) and k.epilogue is not None:
        out.append(k.epilogue[0])
    for x in vars(k).values():
        if isinstance(x, Buffer):
            out.append(x)
        elif isinstance(x, (list, tuple)):
            out += [b for b in x if isinstance(b, Buffer)]
    return out


def _reads(k) -> set:
    """Names of the buffers a kernel spec reads."""
    if isinstance(k, Reduction) and k.epilogue is not None:
        return {v.args[0] for v in vals.walk([k.value, k.epilogue[1]]) if v.op in ("load", "gather")} - {k.out.name}
    if isinstance(k, (Pointwise, Reduction, Scan)):
        return {v.args[0] for v in vals.walk([k.value]) if v.op in ("load", "gather")}
    if isinstance(k, RowFused):
        names = {v.args[0] for v in vals.walk([st.value for st in k.stages] + [k.value])
                 if v.op in ("load", "gather")}
        return names - {st.out.name for st in k.stages}
    return {b.name for b in kernel_buffers(k) if b is not getattr(k, "out", None)}


def drop_dead(kernels: list, outputs: list) -> list:
    """Kernels whose results nothing reads (e.g. the indices of a max whose values alone are used)."""
    need = {b.name for b in outputs}
    kept = []
    for k in reversed(kernels):
        outs = {k.out.name} | ({st.out.name for st in k.stages if st.out.name in k.keep}
                               if isinstance(k, RowFused) else set())
        if isinstance(k, Reduction) and k.epilogue is not None:
            outs = {k.epilogue[0].name} | (outs if k.epilogue[3] else set())
        if isinstance(k, Reduction) and k.out2 is not None:
            outs.add(k.out2.name)
        if isinstance(k, (Pointwise, Reduction, Scan, RowFused)) and not (outs & need):
            continue
        need |= _reads(k)
        kept.append(k)
    return kept[::-1]


def fuse_rows(kernels: list, outputs: list) -> list:
    """A Pointwise kernel over (M, R) rows (or over M rows) that reads row reductions of the same rows
    becomes one RowFused kernel with them when a row fits in registers (`sizes.ROW_MAX`): the rows are
    read once instead of once per reduction (softmax, log_softmax, layer/RMS norm, variance, l2-normalize)."""
    from .core import tiles
    from .index import Var, add, scale
    from .sizes import ROW_MAX, next_pow2

    kernels = list(kernels)
    out_names = {b.name for b in outputs}
    for pi in range(len(kernels)):
        P = kernels[pi]
        if not isinstance(P, Pointwise):
            continue
        n = P.out.numel
        reds = {k.out.name: (j, k) for j, k in enumerate(kernels[:pi])
                if isinstance(k, Reduction) and k.mode == "row" and k.kind in ("sum", "max", "min", "prod")}
        for name in sorted(_reads(P) & set(reds)):
            M, R = reds[name][1].M, reds[name][1].R
            if R < 2 or next_pow2(R) > ROW_MAX or (M * R != n and M != n):
                continue
            per_row = M == n
            m, r = Var("m", M), Var("r", R)
            i = m if per_row else add(scale(m, R), r)
            value = _subst(P.value, {"i": i})
            same = {nm for nm, (_, k) in reds.items() if k.M == M and k.R == R}
            stages = _row_stages([value], same, reds, m)
            if not stages:
                continue
            if not per_row and not tiles(value, {"m": M, "r": R}, ("m", "r"), ()):
                continue
            first = min(reds[nm][0] for nm in stages)
            snames = set(stages)
            # a kernel between the first stage and P that reads a stage's result would now run before it
            if any(_reads(k) & snames for k in kernels[first:pi] if k is not None and k.out.name not in snames):
                continue
            later = set().union(set(), *[_reads(k) for k in kernels[pi + 1:] if k is not None])
            keep = {nm for nm in snames if nm in later or nm in out_names}
            st_specs = [reds[nm][1] for nm in sorted(snames, key=lambda nm: reds[nm][0])]
            kernels[pi] = RowFused(st_specs, P.out, value, M, R, per_row, keep, P.what)
            for spec in st_specs:
                kernels[kernels.index(spec)] = None
            break
    kernels = [k for k in kernels if k is not None]
    kernels = _fuse_reduction_chains(kernels, out_names)
    return _fuse_output_epilogues(kernels, out_names)


def _fuse_reduction_chains(kernels: list, out_names: set) -> list:
    """A row reduction that reads earlier row reductions of the same rows at its row (argmin: the minimum,
    then the first index holding it) becomes one RowFused kernel whose output is its own result."""
    from .index import Var
    from .sizes import ROW_MAX, next_pow2

    for pi in range(len(kernels)):
        K = kernels[pi]
        if not (isinstance(K, Reduction) and K.mode == "row" and K.kind in ("sum", "max", "min", "prod")
                and 2 <= K.R and next_pow2(K.R) <= ROW_MAX):
            continue
        reds = {k.out.name: (j, k) for j, k in enumerate(kernels[:pi])
                if isinstance(k, Reduction) and k.mode == "row" and k.kind in ("sum", "max", "min", "prod")
                and k.M == K.M and k.R == K.R and k.epilogue is None}
        m = Var("m", K.M)
        stages = _row_stages([K.value], set(reds), reds, m)
        if not stages:
            continue
        snames = set(stages)
        first = min(reds[nm][0] for nm in stages)
        if any(_reads(k) & snames for k in kernels[first:pi] if k is not None and k.out.name not in snames):
            continue
        later = set().union(set(), *[_reads(k) for k in kernels[pi + 1:] if k is not None])
        keep = {nm for nm in snames if nm in later or nm in out_names}
        specs = [reds[nm][1] for nm in sorted(snames, key=lambda nm: reds[nm][0])]
        value = vals.load(K.out.name, m, K.out.dtype)      # the last stage's result, stored per row
        kernels[pi] = RowFused(specs + [K], K.out, value, K.M, K.R, True, keep, K.what)
        for spec in specs:
            kernels[kernels.index(spec)] = None
    return [k for k in kernels if k is not None]


def _fuse_output_epilogues(kernels: list, out_names: set) -> list:
    """A Pointwise kernel over a tiled reduction's outputs (mean's division, var's denominator, any/all's
    test) is computed in the reduction's store instead (`Reduction.epilogue`)."""
    import dataclasses

    from .index import Var, add, scale, substitute

    producer = {k.out.name: j for j, k in enumerate(kernels) if hasattr(k, "out")}
    producer.update({k.out2.name: j for j, k in enumerate(kernels) if getattr(k, "out2", None) is not None})
    for pi in range(len(kernels)):
        P = kernels[pi]
        if not isinstance(P, Pointwise):
            continue
        n = P.out.numel
        reads = _reads(P)
        cands = [producer[nm] for nm in reads if nm in producer and producer[nm] < pi]
        if not cands:
            continue
        kj = max(cands)
        K = kernels[kj]
        if not (isinstance(K, Reduction) and K.M == n and K.epilogue is None
                and (K.kind in ("sum", "max", "min", "prod", "welford") if K.mode in ("row", "col")
                     else K.kind in ("sum", "max", "min") and K.out2 is None)):
            continue
        if K.mode in ("row", "generic"):
            i_to = Var("m", K.M)
        else:
            i_to = add(scale(Var("o", K.O), K.I), Var("i", K.I))
        value = _subst(P.value, {"i": i_to})
        key = substitute(Var("i", n), {"i": i_to})
        results = {K.out.name} | ({K.out2.name} if K.out2 is not None else set())
        if any(v.op == "gather" and v.args[0] in results or v.op == "load" and v.args[0] in results
               and (v.args[1] != key or v.args[2]) for v in vals.walk([value])):
            continue
        later = set().union(set(), *[_reads(k) for k in kernels[kj + 1:] if k is not P and k is not None])
        store_result = bool(results & (later | out_names))
        kernels[kj] = dataclasses.replace(K, epilogue=(P.out, value, key, store_result))
        kernels[pi] = None
    return [k for k in kernels if k is not None]


def _row_stages(roots, same: set, reds: dict, m) -> list:
    """The row reductions (names in `same`) that `roots` read at the row index `m`, and those they read,
    transitively; [] when one of them is also read at another index."""
    found, todo = [], list(roots)
    while todo:
        v0 = todo.pop()
        for v in vals.walk([v0]):
            if v.op in ("load", "gather") and v.args[0] in same:
                if v.op == "gather" or v.args[1] != m or v.args[2]:
                    return []
                if v.args[0] not in found:
                    found.append(v.args[0])
                    todo.append(reds[v.args[0]][1].value)
    return found


def _subst(v, mapping: dict, memo=None):
    """The value with loop variables replaced by index expressions (loads, index values, conditions)."""
    from .index import IExpr, substitute
    memo = {} if memo is None else memo
    got = memo.get(id(v))
    if got is not None:
        return got
    args = []
    for a in v.args:
        if isinstance(a, vals.V):
            args.append(_subst(a, mapping, memo))
        elif isinstance(a, IExpr):
            args.append(substitute(a, mapping))
        elif isinstance(a, tuple) and v.op == "load":
            args.append(tuple((c[0], substitute(c[1], mapping)) + tuple(c[2:]) for c in a))
        else:
            args.append(a)
    out = vals.make(v.op, tuple(args), v.dtype)
    memo[id(v)] = out
    return out


def _force_realize(ctx: Context, t: LTensor, base: str) -> Buffer:
    plain = LTensor(t.shape, t.dtype, t._fn)   # drop the buffer marker: always a kernel of its own
    return ctx.realize(plain, base).buffer


