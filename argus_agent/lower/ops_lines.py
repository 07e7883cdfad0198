"""Line ops without a kernel class of their own: cummax / cummin, mode, searchsorted, pdist.

cummax / cummin are reductions over the line: O(n^2) per line of n, exact and deterministic, not fast (lines
longer than ops_reduce.SORT_MAX are refused). mode runs on the stdlib bitonic row sort (O(n log n)) where it
applies, else it is such reductions too. searchsorted is a
binary search written out (ceil(log2(n + 1)) gathers per value, one pointwise expression). pdist is a
reduction over the feature dim per pair, the pair (i, j) of output k computed from k.
"""

from __future__ import annotations

import math

import torch

from . import values as vals
from .core import LTensor, buffer_tensor
from .index import const
from .ops_reduce import SORT_MAX, _acc_dtype
from .registry import register, result_dtype, result_shape
from .values import call

I64 = torch.int64


def _i(v: int):
    return vals.const(v, I64)


def _line(x: LTensor, dim: int, what: str):
    rank = len(x.shape)
    if not rank:
        raise NotImplementedError(f"{what} of a 0-d tensor")
    d = dim + rank if dim < 0 else dim
    n = x.shape[d]
    if n > SORT_MAX:
        raise NotImplementedError(f"{what} along a dim of {n} elements (lowered as O(n^2) reductions over the "
                                  f"line, n <= {SORT_MAX})")
    return d, n


def _extreme(kind: str, dtype):
    if dtype.is_floating_point:
        return vals.const(-math.inf if kind == "max" else math.inf, dtype)
    if dtype == torch.bool:
        return vals.const(kind == "min", dtype)
    info = torch.iinfo(dtype)
    return vals.const(info.min if kind == "max" else info.max, dtype)


def _at(c, d, j):
    return list(c[:d]) + [j] + list(c[d + 1:])


@register("aten.cummax", "aten.cummin")
def _cummax(ctx, node, x, dim):
    """(values, indices) of the running max (min) along `dim`: the extreme of the prefix, and the LAST prefix
    position holding it (torch's: ties move the index forward); a NaN makes the rest NaN, indexed at the
    latest NaN. Three reductions over the line masked to the prefix (O(n^2))."""
    kind = "max" if str(node.target).startswith("aten.cummax") else "min"
    d, n = _line(x, dim, str(node.target).split(".")[1])
    acc = vals.compute_dtype(x.dtype)
    floating = acc.is_floating_point

    def prefix(oc, rc):
        return call("le", vals.index_value(rc[0]), vals.index_value(oc[d]))

    def nan_fn(oc, rc):
        v = vals.cast(x(_at(oc, d, rc[0])), acc)
        ok = call("and", prefix(oc, rc), call("ne", v, v), dtype=torch.bool)
        return call("where", ok, vals.index_value(rc[0]), _i(-1), dtype=I64)
    nan_at = ctx.reduce("max", x.shape, (n,), nan_fn, I64, base="cum_nan") if floating else None

    def best_fn(oc, rc):
        v = vals.cast(x(_at(oc, d, rc[0])), acc)
        ok = prefix(oc, rc)
        if floating:
            ok = call("and", ok, call("eq", v, v), dtype=torch.bool)
        return call("where", ok, v, _extreme(kind, acc), dtype=acc)
    best = ctx.reduce(kind, x.shape, (n,), best_fn, acc, base="cum" + kind)

    def last_fn(oc, rc):
        v = vals.cast(x(_at(oc, d, rc[0])), acc)
        ok = call("and", prefix(oc, rc), call("eq", v, best(oc)), dtype=torch.bool)
        return call("where", ok, vals.index_value(rc[0]), _i(-1), dtype=I64)
    last = ctx.reduce("max", x.shape, (n,), last_fn, I64, base="cum" + kind + "_idx")
    if not floating:
        return LTensor(x.shape, x.dtype, lambda c: vals.cast(best(c), x.dtype)), last

    def value(c):
        return vals.cast(call("where", call("ge", nan_at(c), _i(0)), vals.const(math.nan, acc), best(c), dtype=acc),
                         x.dtype)

    def index(c):
        k = nan_at(c)
        return call("where", call("ge", k, _i(0)), k, last(c), dtype=I64)
    return LTensor(x.shape, x.dtype, value), LTensor(x.shape, I64, index)


def _mode_sorted(ctx, x, d, keepdim):
    """mode on the stdlib bitonic row sort (O(n log n) per line), or None where it does not apply. In the sorted
    line S (stable: equal values in index order) the run of equal values ending at p has length c(p) = p -
    lower_bound(S, S[p]) + 1 (a binary search written out; 1 for a NaN); the first p of the largest c is the
    last element of the smallest most frequent value's run: its value, and its original index, the last index
    holding it."""
    from .index import flatten
    from .ops_reduce import sorted_rows
    from .ops_views import _load_at

    got = sorted_rows(ctx, x, d)
    if got is None:
        return None
    vb, ib, other = got
    n = x.shape[d]
    R = vb.shape[0]
    S, P = buffer_tensor(vb), buffer_tensor(ib)
    acc = vals.compute_dtype(vb.dtype)
    rounds = max(1, math.ceil(math.log2(n + 1)))

    def count(c):
        r, p = c
        v = vals.cast(S([r, p]), acc)
        lo, hi = _i(0), _i(n)
        for _ in range(rounds):      # the first position whose element is not < v
            mid = call("floordiv", call("add", lo, hi), _i(2), dtype=I64)
            live = call("lt", lo, hi)
            s = vals.cast(_load_at(S, [r, None], [(1, call("minimum", mid, _i(n - 1), dtype=I64))]), acc)
            go = call("and", call("lt", s, v), live, dtype=torch.bool)
            lo = call("where", go, call("add", mid, _i(1), dtype=I64), lo, dtype=I64)
            hi = call("where", call("or", go, call("ge", lo, hi), dtype=torch.bool), hi, mid, dtype=I64)
        run = call("add", call("sub", vals.index_value(p), lo, dtype=I64), _i(1), dtype=I64)
        if acc.is_floating_point:
            run = call("where", call("ne", v, v), _i(1), run, dtype=I64)
        return run
    runs = ctx.realize(LTensor((R, n), I64, count), "mode_runs")
    top = ctx.reduce("max", (R,), (n,), lambda oc, rc: runs([oc[0], rc[0]]), I64, base="mode_top")

    def first_top(oc, rc):
        hit = call("eq", runs([oc[0], rc[0]]), top([oc[0]]))
        return call("where", hit, vals.index_value(rc[0]), _i(n), dtype=I64)
    at = ctx.reduce("min", (R,), (n,), first_top, I64, base="mode_at")
    shape = x.shape[:d] + ((1,) if keepdim else ()) + x.shape[d + 1:]

    def back(t, dtype):
        def f(c):
            oc = list(c[:d]) + list(c[d + 1 if keepdim else d:])
            r = flatten(oc, other) if other else const(0)
            return vals.cast(_load_at(t, [r, None], [(1, at([r]))]), dtype)
        return LTensor(shape, dtype, f)
    return back(S, x.dtype), back(P, I64)


@register("aten.mode")
def _mode(ctx, node, x, dim=-1, keepdim=False):
    """(values, indices) of the most frequent value along `dim`: the smallest of the most frequent values
    (torch's) and the last index holding it (torch documents only "an index" of it; its CPU kernel picks one
    from a sort). On the bitonic row sort where it applies (`_mode_sorted`, O(n log n)); otherwise each
    element's count over its line, the line's largest count, the smallest value with it, its last position:
    four reductions (O(n^2) per line). NaNs never count as equal (each NaN appears once)."""
    if len(x.shape):
        fast = _mode_sorted(ctx, x, dim + len(x.shape) if dim < 0 else dim, keepdim)
        if fast is not None:
            return fast
    d, n = _line(x, dim, "mode")
    acc = vals.compute_dtype(x.dtype)
    shape = x.shape
    red = shape[:d] + (1,) + shape[d + 1:]

    def count_fn(oc, rc):
        hit = call("eq", vals.cast(x(_at(oc, d, rc[0])), acc), vals.cast(x(oc), acc))
        return call("where", hit, _i(1), _i(0), dtype=I64)
    count = ctx.reduce("sum", shape, (n,), count_fn, I64, base="mode_count")
    top = ctx.reduce("max", red, (n,), lambda oc, rc: count(_at(oc, d, rc[0])), I64, base="mode_top")

    def value_fn(oc, rc):
        at = _at(oc, d, rc[0])
        ok = call("eq", count(at), top(oc))
        return call("where", ok, vals.cast(x(at), acc), _extreme("min", acc), dtype=acc)
    value = ctx.reduce("min", red, (n,), value_fn, acc, base="mode_value")

    def index_fn(oc, rc):
        ok = call("eq", vals.cast(x(_at(oc, d, rc[0])), acc), value(oc))
        return call("where", ok, vals.index_value(rc[0]), _i(-1), dtype=I64)
    index = ctx.reduce("max", red, (n,), index_fn, I64, base="mode_index")

    def drop(t, dtype):
        if keepdim:
            return LTensor(red, dtype, lambda c: vals.cast(t(c), dtype))
        return LTensor(shape[:d] + shape[d + 1:], dtype,
                       lambda c: vals.cast(t(list(c[:d]) + [const(0)] + list(c[d:])), dtype))
    return drop(value, x.dtype), drop(index, I64)


@register("aten.searchsorted")
def _searchsorted(ctx, node, seq, v, *, out_int32=False, right=False, side=None, sorter=None):
    """The insertion points of `v` in the sorted last dim of `seq` (1-D: one sequence for every value; else
    one per leading index, shared by the values' leading dims): a binary search written out, ceil(log2(n + 1))
    rounds of a gather and a compare per value. left: the first position whose element is >= v, right: > v
    (`side` overrides `right`); `sorter` orders an unsorted sequence. NaN compares as torch's (never < v)."""
    from .ops_views import _load_at

    right = side == "right" if side is not None else bool(right)
    n = seq.shape[-1]
    out_dtype = torch.int32 if out_int32 else I64
    scalar = not isinstance(v, LTensor)
    shape = () if scalar else v.shape
    if len(seq.shape) > 1 and (scalar or tuple(seq.shape[:-1]) != tuple(shape[:-1])):
        raise NotImplementedError(f"searchsorted of values {shape} in sequences {seq.shape} (leading dims differ)")
    sb = ctx.realize(seq, "sorted_seq")
    ob = ctx.realize(sorter, "sorter") if sorter is not None else None
    acc = vals.promote(vals.compute_dtype(seq.dtype), vals.compute_dtype(v.dtype) if not scalar else
                       (torch.float32 if isinstance(v, float) else I64))
    rounds = max(1, math.ceil(math.log2(n + 1))) if n else 0

    def f(c):
        row = list(c[:-1]) if len(seq.shape) > 1 else []
        val = vals.const(v, acc) if scalar else vals.cast(v(c), acc)
        lo, hi = _i(0), _i(n)
        for _ in range(rounds):
            mid = call("floordiv", call("add", lo, hi), _i(2), dtype=I64)
            live = call("lt", lo, hi)
            at = call("minimum", mid, _i(n - 1), dtype=I64)
            if ob is not None:
                at = vals.cast(_load_at(ob, row + [None], [(len(seq.shape) - 1, at)]), I64)
            s = vals.cast(_load_at(sb, row + [None], [(len(seq.shape) - 1, at)]), acc)
            go = call("le" if right else "lt", s, val)
            go = call("and", go, live, dtype=torch.bool)
            lo = call("where", go, call("add", mid, _i(1), dtype=I64), lo, dtype=I64)
            hi = call("where", call("or", go, call("ge", lo, hi), dtype=torch.bool), hi, mid, dtype=I64)
        return vals.cast(lo, out_dtype)
    return LTensor(shape, out_dtype, f)


@register("aten._pdist_forward")
def _pdist(ctx, node, x, p=2.0):
    """torch.pdist: the p-norm distances of the pairs i < j of x's rows, in row-major pair order. Output k's
    pair from k (i from a square root, corrected by one either way in exact integers), then a reduction over
    the features of |x[i] - x[j]|^p gathered at run-time rows (as cdist: p = 0 counts, inf takes the max)."""
    from .ops_views import _load_at

    N, M = x.shape
    K = result_shape(node)[0]
    acc = _acc_dtype(result_dtype(node))
    xb = ctx.realize(x, "pdist_in")

    def start(i):   # the output index of the pair (i, i + 1): i (2N - i - 1) / 2
        return call("floordiv", call("mul", i, call("sub", _i(2 * N - 1), i, dtype=I64), dtype=I64), _i(2),
                    dtype=I64)

    def pair(k):
        kf = vals.cast(k, torch.float32)
        disc = call("sub", vals.const(4.0 * N * (N - 1) - 7.0, torch.float32), call("mul", kf, vals.const(
            8.0, torch.float32)))
        root = call("sqrt", call("maximum", disc, vals.const(0.0, torch.float32)))
        half = call("sub", call("mul", root, vals.const(0.5, torch.float32)), vals.const(0.5, torch.float32))
        i = call("sub", _i(N - 2), vals.cast(call("maximum", half, vals.const(0.0, torch.float32)), I64), dtype=I64)
        i = call("maximum", call("minimum", i, _i(N - 2), dtype=I64), _i(0), dtype=I64)
        i = call("where", call("le", start(call("add", i, _i(1), dtype=I64)), k), call("add", i, _i(1), dtype=I64),
                 i, dtype=I64)
        i = call("where", call("gt", start(i), k), call("sub", i, _i(1), dtype=I64), i, dtype=I64)
        j = call("add", call("sub", k, start(i), dtype=I64), call("add", i, _i(1), dtype=I64), dtype=I64)
        return i, j
    kind = "max" if p == math.inf else "sum"
    if K == 0:
        return LTensor((0,), acc, lambda c: vals.const(0.0, acc))
    # the pair of each output once, in two index buffers (computed per reduced element it spills registers)
    rows = [ctx.realize(LTensor((K,), I64, lambda c, s=s: pair(vals.index_value(c[0]))[s]), f"pdist_{n}")
            for s, n in ((0, "i"), (1, "j"))]

    def fn(oc, rc):
        i, j = (vals.cast(t([oc[0]]), I64) for t in rows)
        a = vals.cast(_load_at(xb, [None, rc[0]], [(0, i)]), acc)
        b = vals.cast(_load_at(xb, [None, rc[0]], [(0, j)]), acc)
        dd = call("abs", call("sub", a, b))
        if p == 0:
            return vals.cast(call("ne", dd, vals.const(0.0, acc)), acc)
        if p in (1, math.inf):
            return dd
        if p == 2:
            return call("mul", dd, dd)
        return call("pow", dd, vals.const(float(p), acc))
    red = ctx.reduce(kind, (K,), (M,), fn, acc, base="pdist")
    if p in (0, 1, math.inf):
        return red
    if p == 2:
        return LTensor((K,), acc, lambda c: call("sqrt", red(c)))
    return LTensor((K,), acc, lambda c: call("pow", red(c), vals.const(1.0 / p, acc)))
