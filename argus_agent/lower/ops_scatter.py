"""The scatter family: scatter (src / value / reduce), scatter_add, scatter_reduce, index_put (what index_add,
index_copy, `x[i] = v` and F.fold decompose to).

A scatter writes at places its data picks; the lowering computes each OUTPUT element instead (a pull): the
element out[c] folds the source elements whose index names c, in their order. Over the J candidates of its
line (scatter: the index's extent along `dim`; index_put: every index position) that is a reduction of
`where(hit, value, neutral)`, O(outputs x candidates): exact and deterministic, not fast for long index
lines. At most UNROLL candidates are written out as one pointwise expression (a MoE gate, `zeros.scatter(1,
topk_ids, topk_weights)`, is then fused into its consumer). Overwrites (scatter, index_put without accumulate)
take the LAST candidate that names the element (what torch's CPU kernels do; torch leaves duplicates
undefined); sums accumulate in the compute dtype (fp32 for floats: the order differs from torch's atomics,
compared at its tolerance).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from . import values as vals
from .core import Buffer, LTensor, broadcast_coords, broadcast_shapes, buffer_tensor
from .index import as_index, const, numel, unflatten
from .registry import register
from .values import call

UNROLL = 8   # candidates per output written out as one expression instead of a reduction kernel


@dataclass
class ScatterAddTemplate:
    """out (M, D) f32, holding x already (a copy kernel before it), gets src (N, D) row i added to row
    index[i] by `stdlib_kernels/scatter_add.py` (atomic adds: the order of equal-index rows varies, as
    torch's CUDA index_add)."""

    out: Buffer
    src: Buffer
    index: Buffer
    N: int
    M: int
    D: int
    what: str = ""

    @property
    def K(self) -> int:       # the longest sum it runs (for tolerances)
        return self.N


def render_scatter_add(t: ScatterAddTemplate) -> list[str]:
    return [f"launch(scatter_add, (tp.cdiv({t.N}, 16),), {t.src.name}.view({t.N}, {t.D}), {t.index.name}, "
            f"{t.out.name}.view({t.M}, {t.D}))"]


def _row_scatter_add(ctx, x: LTensor, index: LTensor, values, n: int) -> LTensor:
    """x.index_add(0, index, values) on a GPU target: a copy of x, then the stdlib atomic row scatter-add
    (O(N x D) instead of the pull's O(M x N x D))."""
    M = x.shape[0]
    D = numel(x.shape[1:])
    out = ctx.realize(LTensor(x.shape, x.dtype, x._fn), "index_add").buffer    # always a copy of its own
    ishape = (n,) + tuple(x.shape[1:])
    if isinstance(values, LTensor):
        src = LTensor(ishape, torch.float32, lambda c: vals.cast(values(broadcast_coords(c, values.shape, ishape)),
                                                                  torch.float32))
    else:
        v = vals.const(values, torch.float32)
        src = LTensor(ishape, torch.float32, lambda c: v)
    sb = ctx.contiguous(src, "index_add_src").buffer
    ib = ctx.realize(LTensor((n,), torch.int64, lambda c: _wrap(index(c), M)), "index_add_rows").buffer
    ctx.kernels.append(ScatterAddTemplate(out, sb, ib, n, M, D, ctx.note))
    return buffer_tensor(out)


def _wrap(v, n: int):
    """An int64 index value with negative indices wrapped as torch does."""
    v = vals.cast(v, torch.int64)
    return call("where", call("lt", v, vals.const(0, torch.int64)), call("add", v, vals.const(n, torch.int64)), v)


def _and(a, b):
    return b if a is None else a if b is None else call("and", a, b, dtype=torch.bool)


_COMBINE = {"sum": "add", "prod": "mul", "max": "maximum", "min": "minimum"}


def fold_candidates(ctx, kind: str, shape, n: int, fn, dtype, base: str) -> LTensor:
    """out[c] = combine over j < n of fn(c, j) (an IExpr j): written out for n <= UNROLL, else a Reduction
    kernel over (n,)."""
    if n <= UNROLL:
        def f(c):
            acc = None
            for j in range(n):
                v = vals.cast(fn(list(c), const(j)), dtype)
                acc = v if acc is None else call(_COMBINE[kind], acc, v, dtype=vals.compute_dtype(dtype))
            return acc
        return LTensor(shape, dtype, f)
    return ctx.reduce(kind, shape, (n,), lambda oc, rc: fn(list(oc), rc[0]), dtype, base=base)


def _neutral(kind: str, dtype):
    dtype = vals.compute_dtype(dtype)
    if kind == "sum":
        return vals.const(0, dtype)
    if kind == "prod":
        return vals.const(1, dtype)
    if dtype.is_floating_point:
        return vals.const(-math.inf if kind == "max" else math.inf, dtype)
    if dtype == torch.bool:
        return vals.const(kind == "min", dtype)
    info = torch.iinfo(dtype)
    return vals.const(info.min if kind == "max" else info.max, dtype)


def _acc(dtype):
    return vals.compute_dtype(dtype) if dtype.is_floating_point else torch.int64


def combine(ctx, x: LTensor, hit, value, n: int, mode: str, include_self: bool, base: str, pick=None) -> LTensor:
    """The scattered result over x's shape. hit(c, j) -> bool V (candidate j names element c), value(c, j)
    its value. mode: "set" (the last hit; `pick(c, jbest)` reads the value at a run-time candidate index),
    "sum", "prod", "amax", "amin", "mean"; include_self: x's own element takes part (scatter_reduce)."""
    dtype, shape = x.dtype, x.shape
    cdt = vals.compute_dtype(dtype)
    i64 = torch.int64
    if mode == "set":
        if n <= UNROLL:   # written out: the last hit's value directly, no run-time index
            def f(c):
                out = vals.cast(x(c), cdt)
                for j in range(n):
                    out = call("where", hit(c, const(j)), vals.cast(value(c, const(j)), cdt), out, dtype=cdt)
                return out
            return LTensor(shape, dtype, f)
        last = fold_candidates(ctx, "max", shape, n, lambda c, j: call(
            "where", hit(c, j), vals.index_value(j), vals.const(-1, i64), dtype=i64), i64, base + "_last")

        def g(c):
            jb = last(c)
            found = call("ge", jb, vals.const(0, i64))
            safe = call("where", found, jb, vals.const(0, i64), dtype=i64)
            return call("where", found, vals.cast(pick(c, safe), cdt), vals.cast(x(c), cdt), dtype=cdt)
        return LTensor(shape, dtype, g)
    kind = {"sum": "sum", "mean": "sum", "prod": "prod", "amax": "max", "amin": "min"}[mode]
    acc = _acc(dtype) if kind in ("sum", "prod") else cdt
    neutral = _neutral(kind, acc)
    total = fold_candidates(ctx, kind, shape, n, lambda c, j: call(
        "where", hit(c, j), vals.cast(value(c, j), acc), neutral, dtype=acc), acc, base)
    count = None
    if mode == "mean" or not include_self:
        one, zero = vals.const(1, i64), vals.const(0, i64)
        count = fold_candidates(ctx, "sum", shape, n, lambda c, j: call("where", hit(c, j), one, zero, dtype=i64),
                                i64, base + "_count")

    def f(c):
        t, own = total(c), vals.cast(x(c), acc)
        if mode == "mean":
            k = count(c)
            if include_self:
                t, k = call("add", t, own), call("add", k, vals.const(1, i64))
            kk = vals.cast(call("where", call("eq", k, vals.const(0, i64)), vals.const(1, i64), k, dtype=i64), acc)
            out = call("div" if acc.is_floating_point else "floordiv", t, kk, dtype=acc)
            if not include_self:
                out = call("where", call("eq", k, vals.const(0, i64)), own, out, dtype=acc)
            return vals.cast(out, cdt)
        if include_self:
            out = call(_COMBINE[kind], own, t, dtype=acc)
        else:
            out = call("where", call("eq", count(c), vals.const(0, i64)), own, t, dtype=acc)
        return vals.cast(out, cdt)
    return LTensor(shape, dtype, f)


def _flat_scatter_add(ctx, x: LTensor, d: int, index: LTensor, src) -> LTensor:
    """scatter_add on a GPU target: every (index element, source element) pair is one atomic add at its flat
    offset into a copy of x (the stdlib row scatter-add with rows of one element), O(index elements)."""
    from .index import flatten

    rank, ishape = len(x.shape), index.shape
    strides = [numel(x.shape[k + 1:]) for k in range(rank)]
    out = ctx.realize(LTensor(x.shape, x.dtype, x._fn), "scatter_add").buffer      # always a copy of its own

    def at(c):
        rest = flatten([const(0) if k == d else c[k] for k in range(rank)], x.shape)
        e = call("mul", _wrap(index(c), x.shape[d]), vals.const(strides[d], torch.int64), dtype=torch.int64)
        return call("add", vals.index_value(rest), e, dtype=torch.int64)
    ib = ctx.realize(LTensor(ishape, torch.int64, at), "scatter_add_at").buffer
    if isinstance(src, LTensor):
        sv = LTensor(ishape, torch.float32, lambda c: vals.cast(src(c), torch.float32))
    else:
        one = vals.const(src, torch.float32)
        sv = LTensor(ishape, torch.float32, lambda c: one)
    sb = ctx.contiguous(sv, "scatter_add_src").buffer
    ctx.kernels.append(ScatterAddTemplate(out, sb, ib, numel(ishape), x.numel, 1, ctx.note))
    return buffer_tensor(out)


def _scatter(ctx, node, x: LTensor, dim: int, index: LTensor, src, mode: str, include_self=True) -> LTensor:
    """scatter along `dim`: candidate j of out[c] is index[c with j at dim] (for c inside the index's extent
    in the other dims), naming c[dim]; its value src[c with j at dim] (src a tensor or a number)."""
    rank = len(x.shape)
    if rank == 0:
        raise NotImplementedError("a scatter into a 0-d tensor")
    d = dim + rank if dim < 0 else dim
    if len(index.shape) != rank:
        raise NotImplementedError(f"an index of rank {len(index.shape)} for a rank-{rank} tensor")
    n = index.shape[d]
    if n == 0 or index.numel == 0:
        return x
    if mode == "sum" and include_self and ctx.target != "cpu" and x.dtype == torch.float32 and n > UNROLL:
        return _flat_scatter_add(ctx, x, d, index, src)
    cdt = vals.compute_dtype(x.dtype)

    def at(c, j):
        """The index / src coordinates of candidate j for out[c] (kept in range where c is outside the index:
        that candidate is masked off)."""
        cc = []
        for k in range(rank):
            if k == d:
                cc.append(as_index(j))
            elif index.shape[k] < x.shape[k]:
                cc.append(as_index(c[k]) % index.shape[k])
            else:
                cc.append(c[k])
        return cc

    def inside(c):
        ok = None
        for k in range(rank):
            if k != d and index.shape[k] < x.shape[k]:
                ok = _and(ok, call("lt", vals.index_value(c[k]), vals.const(index.shape[k], torch.int64)))
        return ok

    def hit(c, j):
        e = call("eq", _wrap(index(at(c, j)), x.shape[d]), vals.index_value(c[d]))
        return _and(inside(c), e)

    if isinstance(src, LTensor):
        def value(c, j):
            return src(at(c, j))
    else:
        sv = vals.const(src, cdt)

        def value(c, j):
            return sv

    def pick(c, jb):
        if not isinstance(src, LTensor):
            return sv
        from .ops_views import _load_at
        sb = ctx.realize(src, "scatter_src")
        coords = [None if k == d else (as_index(c[k]) % src.shape[k] if src.shape[k] < x.shape[k] else c[k])
                  for k in range(rank)]
        return _load_at(sb, coords, [(d, jb)])
    return combine(ctx, x, hit, value, n, mode, include_self, "scatter", pick)


@register("aten.scatter")
def _scatter_op(ctx, node, x, dim, index, src, reduce=None):
    """scatter.src / .value (overwrite) and .reduce / .value_reduce ("add" | "multiply")."""
    mode = {None: "set", "add": "sum", "multiply": "prod"}[reduce]
    return _scatter(ctx, node, x, dim, index, src, mode)


@register("aten.scatter_add")
def _scatter_add(ctx, node, x, dim, index, src):
    return _scatter(ctx, node, x, dim, index, src, "sum")


@register("aten.scatter_reduce")
def _scatter_reduce(ctx, node, x, dim, index, src, reduce, include_self=True):
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise NotImplementedError(f"scatter_reduce with reduce={reduce!r}")
    return _scatter(ctx, node, x, dim, index, src, reduce, include_self)


@register("aten.index_put", "aten._unsafe_index_put")
def _index_put(ctx, node, x, indices, values, accumulate=False):
    """x with x[indices] = values (accumulate: +=): the index tensors (None = a full slice) broadcast to one
    shape B whose positions are the candidates; candidate p names x[.., idx_0[p], idx_1[p], .., ..] and
    carries values[.., p, ..] (values broadcast to the indexed shape). A boolean mask index with one value
    (`x[mask] = v`) is a `where`."""
    rank = len(x.shape)
    idx = list(indices) + [None] * (rank - len(indices))
    tensors = [t for t in idx if t is not None]
    if not tensors:
        raise NotImplementedError("index_put without an index tensor")
    first = next(k for k, t in enumerate(idx) if t is not None)
    cdt = vals.compute_dtype(x.dtype)
    vshape = values.shape if isinstance(values, LTensor) else ()
    if any(t.dtype == torch.bool for t in tensors):
        if len(tensors) != 1 or numel(vshape) != 1:
            raise NotImplementedError("index_put with a boolean mask and more than one value (the values go to "
                                      "data-dependent places)")
        mask = tensors[0]
        m = len(mask.shape)

        def where_mask(c):
            hit = vals.cast(mask(c[first:first + m]), torch.bool)
            v = vals.cast(values([const(0)] * len(vshape)) if isinstance(values, LTensor) else
                          vals.const(values, cdt), cdt)
            own = vals.cast(x(c), cdt)
            return call("where", hit, call("add", own, v, dtype=cdt) if accumulate else v, own, dtype=cdt)
        return LTensor(x.shape, x.dtype, where_mask)
    if any(t is None for t in idx[first:first + len(tensors)]):
        raise NotImplementedError("index_put with advanced indices separated by a slice")
    bshape = broadcast_shapes(*[t.shape for t in tensors])
    nb, nt = len(bshape), len(tensors)
    ishape = x.shape[:first] + tuple(bshape) + x.shape[first + nt:]   # the shape of x[indices]
    P = numel(bshape)
    if P == 0:
        return x
    if accumulate and ctx.target != "cpu" and first == 0 and nt == 1 and nb == 1 and x.dtype == torch.float32 \
            and P > UNROLL:
        return _row_scatter_add(ctx, x, tensors[0], values, P)

    def pos(p):
        return unflatten(as_index(p), bshape) if bshape else []

    def hit(c, p):
        pc, ok = pos(p), None
        for k, t in enumerate(tensors):
            v = _wrap(t(broadcast_coords(pc, t.shape, bshape)), x.shape[first + k])
            ok = _and(ok, call("eq", v, vals.index_value(c[first + k])))
        return ok

    def icoords(c, p):
        return list(c[:first]) + pos(p) + list(c[first + nt:])

    if isinstance(values, LTensor):
        def value(c, p):
            return values(broadcast_coords(icoords(c, p), values.shape, ishape))
    else:
        def value(c, p):
            return vals.const(values, cdt)

    def pick(c, pb):
        if not isinstance(values, LTensor):
            return vals.const(values, cdt)
        from .ops_views import _load_at
        vb = ctx.realize(values, "index_put_values")
        lead = len(ishape) - len(values.shape)
        coords, dyn = [], []
        strides = [numel(bshape[k + 1:]) for k in range(nb)]
        for k, size in enumerate(values.shape):
            r = k + lead              # the indexed shape's dim this values dim broadcasts to
            if size == 1:
                coords.append(const(0))
            elif first <= r < first + nb:
                coords.append(None)
                b = r - first
                v = call("floordiv", pb, vals.const(strides[b], torch.int64), dtype=torch.int64)
                dyn.append((k, call("mod", v, vals.const(bshape[b], torch.int64), dtype=torch.int64)))
            else:
                coords.append(c[r if r < first else r - nb + nt])
        return _load_at(vb, coords, dyn)
    return combine(ctx, x, hit, value, P, "sum" if accumulate else "set", True, "index_put", pick)
