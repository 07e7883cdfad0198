"""Reductions, scans, softmax and norms: Reduction kernels over any dims, with pointwise prologues inlined."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from . import values as vals
from .core import Buffer, LTensor, broadcast_coords, buffer_tensor
from .index import const
from .registry import register, result_dtype, result_shape
from .values import call


def _dims(dims, rank: int) -> list:
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d + rank if d < 0 else d for d in dims})


def merge(out_coords, red_coords, dims, rank):
    """Full coordinates from the kept dims' and the reduced dims' coordinates."""
    it_o, it_r = iter(out_coords), iter(red_coords)
    return [next(it_r) if d in dims else next(it_o) for d in range(rank)]


def reduce(ctx, x: LTensor, dims, kind: str, dtype=None, value=None, keepdim=False, base="red") -> LTensor:
    """combine_{dims} value(x at full coords, full coords) -> tensor (keepdim: reduced dims kept as size 1).

    `value(v, full_coords)` maps the loaded element before combining (default: v itself)."""
    rank = len(x.shape)
    dims = _dims(dims, rank)
    runs = _runs([d for d in dims if x.shape[d] != 1])
    if len(runs) > 1 and kind in ("sum", "max", "min", "prod"):
        # reduced dims in several runs (e.g. dims 0 and 2): reduce the innermost run first (a row or column
        # reduction that reads the input once), then the rest of the (much smaller) result
        inner = runs[-1]
        part = reduce(ctx, x, inner, kind, dtype, value, keepdim=True, base=base + "_part")
        rest = [d for d in dims if d not in inner]
        return reduce(ctx, part, rest + inner, kind, dtype, None, keepdim=keepdim, base=base)
    out_shape = tuple(n for d, n in enumerate(x.shape) if d not in dims)
    red_shape = tuple(x.shape[d] for d in dims)
    dtype = dtype or x.dtype
    cdt = vals.compute_dtype(dtype)

    def fn(oc, rc):
        full = merge(oc, rc, dims, rank)
        v = x(full)
        v = value(v, full) if value is not None else v
        return vals.cast(v, cdt)
    red = ctx.reduce(kind, out_shape, red_shape, fn, dtype, base=base)
    return keep(red, dims, rank) if keepdim else red


def _runs(dims) -> list:
    """Sorted dims as runs of consecutive ones: [0, 2, 3] -> [[0], [2, 3]]."""
    out = []
    for d in dims:
        if out and out[-1][-1] == d - 1:
            out[-1].append(d)
        else:
            out.append([d])
    return out


def keep(t: LTensor, dims, rank) -> LTensor:
    """Re-insert reduced dims as size 1."""
    shape = []
    it = iter(t.shape)
    for d in range(rank):
        shape.append(1 if d in dims else next(it))
    return LTensor(tuple(shape), t.dtype, lambda c: t([c[d] for d in range(rank) if d not in dims]))


def broadcast_back(red_keep: LTensor, shape):
    """A keepdim-shaped tensor read at coordinates of `shape`."""
    return lambda c: red_keep([const(0) if red_keep.shape[d] == 1 and shape[d] != 1 else c[d]
                               for d in range(len(shape))])


def _acc_dtype(dtype):
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


@register("aten.sum")
def _sum(ctx, node, x, dims=None, keepdim=False, dtype=None):
    out = result_dtype(node)
    acc = _acc_dtype(out) if out != torch.bool else torch.int64
    r = reduce(ctx, x, dims, "sum", acc, keepdim=keepdim, base="sum")
    return _as(r, out)


def _as(t: LTensor, dtype) -> LTensor:
    if t.dtype == dtype:
        return t
    return LTensor(t.shape, dtype, lambda c: vals.cast(t(c), dtype))


@register("aten.mean")
def _mean(ctx, node, x, dims=None, keepdim=False, dtype=None):
    out = result_dtype(node)
    rank = len(x.shape)
    n = math.prod(x.shape[d] for d in _dims(dims, rank))
    s = reduce(ctx, x, dims, "sum", _acc_dtype(out), keepdim=keepdim, base="mean")
    cdt = vals.compute_dtype(out)
    return LTensor(s.shape, out, lambda c: call("div", vals.cast(s(c), cdt), vals.const(n, cdt)))


@register("aten.amax", "aten.max.default", "aten.max.dim")
def _amax(ctx, node, x, dims=None, keepdim=False):
    if str(node.target) == "aten.max.dim":
        return _with_index(ctx, node, x, dims, keepdim, "max")
    return reduce(ctx, x, dims, "max", keepdim=keepdim, base="amax")


@register("aten.amin", "aten.min.default", "aten.min.dim")
def _amin(ctx, node, x, dims=None, keepdim=False):
    if str(node.target) == "aten.min.dim":
        return _with_index(ctx, node, x, dims, keepdim, "min")
    return reduce(ctx, x, dims, "min", keepdim=keepdim, base="amin")


def _fused_arg(ctx, x, dim, kind):
    """(values, indices), both keepdim, from one column-mode kernel; None where that does not apply."""
    rank = len(x.shape)
    d = dim + rank if dim < 0 else dim
    if not x.dtype.is_floating_point or x.shape[d] < 2:
        return None
    cdt = vals.compute_dtype(x.dtype)
    out_shape = tuple(n for k, n in enumerate(x.shape) if k != d)
    got = ctx.reduce_arg(kind, out_shape, x.shape[d], lambda oc, rc: vals.cast(x(merge(oc, rc, [d], rank)), cdt),
                         x.dtype)
    if got is None:
        return None
    return keep(got[0], [d], rank), keep(got[1], [d], rank)


def _drop(t: LTensor, d: int) -> LTensor:
    """A keepdim tensor without its size-1 dim `d`."""
    return LTensor(tuple(n for k, n in enumerate(t.shape) if k != d), t.dtype, lambda c: t(c[:d] + [const(0)] + c[d:]))


def _unused_output(node, k: int) -> bool:
    """Nothing in the graph reads output `k` of the multi-output node."""
    import operator

    users = list(getattr(node, "users", ()))
    return bool(users) and all(u.op == "call_function" and u.target is operator.getitem and u.args[1] != k
                               for u in users)


def _with_index(ctx, node, x, dim, keepdim, kind):
    if _unused_output(node, 1):     # torch.min(x, dim).values: the plain reduction, no index lanes
        val = reduce(ctx, x, [dim], kind, keepdim=keepdim, base=f"a{kind}")
        return val, None
    fused = _fused_arg(ctx, x, dim, kind)
    if fused is not None:
        d = dim + len(x.shape) if dim < 0 else dim
        return fused if keepdim else (_drop(fused[0], d), _drop(fused[1], d))
    val = reduce(ctx, x, [dim], kind, keepdim=True, base=f"a{kind}")
    idx = _arg_index(ctx, x, dim, val, keepdim=keepdim)
    rank = len(x.shape)
    d = dim + rank if dim < 0 else dim
    v = val if keepdim else LTensor(tuple(n for k, n in enumerate(val.shape) if k != d), val.dtype,
                                    lambda c: val(c[:d] + [const(0)] + c[d:]))
    return v, idx


def _arg_index(ctx, x, dim, best_keep: LTensor, keepdim=False) -> LTensor:
    """The first index along `dim` where x equals the (keepdim) extreme `best_keep` (torch's tie rule)."""
    rank = len(x.shape)
    d = dim + rank if dim < 0 else dim
    n = x.shape[d]
    read_best = broadcast_back(best_keep, x.shape)

    def value(v, full):
        b = read_best(full)
        hit = call("or", call("eq", v, b), call("and", call("ne", b, b), call("ne", v, v), dtype=torch.bool),
                   dtype=torch.bool)
        return call("where", hit, vals.index_value(full[d]), vals.const(n, torch.int64), dtype=torch.int64)
    return reduce(ctx, x, [d], "min", torch.int64, value=value, keepdim=keepdim, base="argidx")


def _argext(ctx, node, x, dim, keepdim, kind):
    if dim is None:
        flat = LTensor((x.numel,), x.dtype, lambda c: x(_unflat(c[0], x.shape)))
        best = reduce(ctx, flat, [0], kind, keepdim=True, base=f"a{kind}")
        out = _arg_index(ctx, flat, 0, best, keepdim=False)
        if keepdim:
            return LTensor((1,) * len(x.shape), out.dtype, lambda c: out([]))
        return out
    fused = _fused_arg(ctx, x, dim, kind)
    if fused is not None:
        return fused[1] if keepdim else _drop(fused[1], dim + len(x.shape) if dim < 0 else dim)
    best = reduce(ctx, x, [dim], kind, keepdim=True, base=f"a{kind}")
    return _arg_index(ctx, x, dim, best, keepdim=keepdim)


def _unflat(e, shape):
    from .index import unflatten
    return unflatten(e, shape)


@register("aten.argmax")
def _argmax(ctx, node, x, dim=None, keepdim=False):
    return _argext(ctx, node, x, dim, keepdim, "max")


@register("aten.argmin")
def _argmin(ctx, node, x, dim=None, keepdim=False):
    return _argext(ctx, node, x, dim, keepdim, "min")


@register("aten.prod")
def _prod(ctx, node, x, dims=None, keepdim=False, dtype=None):
    out = result_dtype(node)
    r = reduce(ctx, x, dims, "prod", _acc_dtype(out), keepdim=keepdim, base="prod")
    return _as(r, out)


def _truth(kind):
    def lower(ctx, node, x, dims=None, keepdim=False):
        nz = lambda v, full: vals.cast(call("ne", v, vals.const(0, v.dtype)), torch.int32)  # noqa: E731
        r = reduce(ctx, x, dims, kind, torch.int32, value=nz, keepdim=keepdim, base="any" if kind == "max" else "all")
        return LTensor(r.shape, torch.bool, lambda c: call("ne", r(c), vals.const(0, torch.int32)))
    return lower


register("aten.any")(_truth("max"))
register("aten.all")(_truth("min"))


def _var_parts(ctx, x, dims, correction, keepdim):
    """(mean keepdim, var keepdim) by two passes: mean, then the mean of squared deviations."""
    rank = len(x.shape)
    dims = _dims(dims, rank)
    n = math.prod(x.shape[d] for d in dims)
    acc = _acc_dtype(x.dtype)
    one_pass = None
    if acc.is_floating_point and len(_runs([d for d in dims if x.shape[d] != 1])) == 1:
        out_shape = tuple(k for d, k in enumerate(x.shape) if d not in dims)
        one_pass = ctx.reduce_welford(out_shape, tuple(x.shape[d] for d in dims),
                                      lambda oc, rc: vals.cast(x(merge(oc, rc, dims, rank)), acc), acc)
    if one_pass is not None:
        # Welford in one read of x (a column reduction, or rows too long for registers)
        mean, ss = keep(one_pass[0], dims, rank), keep(one_pass[1], dims, rank)
    else:
        s = reduce(ctx, x, dims, "sum", acc, keepdim=True, base="vsum")
        mean = LTensor(s.shape, acc, lambda c: call("div", s(c), vals.const(n, acc)))
        read_mean = broadcast_back(mean, x.shape)

        def sq(v, full):
            dlt = call("sub", vals.cast(v, acc), read_mean(full))
            return call("mul", dlt, dlt)
        ss = reduce(ctx, x, dims, "sum", acc, value=sq, keepdim=True, base="vsq")
    denom = max(0, n - correction)
    if denom == 0:   # torch: the variance of fewer values than the correction is nan
        var = LTensor(ss.shape, acc, lambda c: vals.const(math.nan, acc))
    else:
        var = LTensor(ss.shape, acc, lambda c: call("div", ss(c), vals.const(denom, acc)))
    return mean, var, dims


@register("aten.var")
def _var(ctx, node, x, dims=None, unbiased=None, keepdim=False, correction=None, **kw):
    if correction is None:
        correction = 1 if (unbiased is None or unbiased is True) else 0
    mean, var, dims = _var_parts(ctx, x, dims, correction, True)
    out = result_dtype(node)
    if keepdim:
        return _as(var, out)
    rank = len(x.shape)
    shape = tuple(n for d, n in enumerate(x.shape) if d not in dims)
    return LTensor(shape, out, lambda c: vals.cast(var(_reinsert(c, dims, rank)), out))


def _reinsert(c, dims, rank):
    it = iter(c)
    return [const(0) if d in dims else next(it) for d in range(rank)]


@register("aten.var_mean")
def _var_mean(ctx, node, x, dims=None, unbiased=None, keepdim=False, correction=None, **kw):
    if correction is None:
        correction = 1 if (unbiased is None or unbiased is True) else 0
    mean, var, dims = _var_parts(ctx, x, dims, correction, True)
    if keepdim:
        return var, mean
    rank = len(x.shape)
    shape = tuple(n for d, n in enumerate(x.shape) if d not in dims)
    return (LTensor(shape, var.dtype, lambda c: var(_reinsert(c, dims, rank))),
            LTensor(shape, mean.dtype, lambda c: mean(_reinsert(c, dims, rank))))


@register("aten.linalg_vector_norm")
def _vnorm(ctx, node, x, ord=2, dims=None, keepdim=False, dtype=None):
    out = result_dtype(node)
    acc = _acc_dtype(out)
    if ord == 2:
        s = reduce(ctx, x, dims, "sum", acc, value=lambda v, f: call("mul", vals.cast(v, acc), vals.cast(v, acc)),
                   keepdim=keepdim, base="norm")
        return LTensor(s.shape, out, lambda c: call("sqrt", s(c)))
    if ord == 1:
        return reduce(ctx, x, dims, "sum", acc, value=lambda v, f: call("abs", vals.cast(v, acc)), keepdim=keepdim,
                      base="norm")
    if ord == math.inf:
        return reduce(ctx, x, dims, "max", acc, value=lambda v, f: call("abs", vals.cast(v, acc)), keepdim=keepdim,
                      base="norm")
    p = float(ord)
    s = reduce(ctx, x, dims, "sum", acc, value=lambda v, f: call("pow", call("abs", vals.cast(v, acc)),
                                                                  vals.const(p, acc)), keepdim=keepdim, base="norm")
    return LTensor(s.shape, out, lambda c: call("pow", s(c), vals.const(1.0 / p, acc)))


def _softmax_parts(ctx, x, dim):
    acc = _acc_dtype(x.dtype)
    rank = len(x.shape)
    d = dim + rank if dim < 0 else dim
    mx = reduce(ctx, x, [d], "max", acc, value=lambda v, f: vals.cast(v, acc), keepdim=True, base="smax")
    read_mx = broadcast_back(mx, x.shape)

    def shifted(c):
        return call("sub", vals.cast(x(c), acc), read_mx(c))
    sh = LTensor(x.shape, acc, shifted)
    s = reduce(ctx, sh, [d], "sum", acc, value=lambda v, f: call("exp", v), keepdim=True, base="ssum")
    return sh, broadcast_back(s, x.shape), acc


@register("aten._softmax", "aten.softmax")
def _softmax(ctx, node, x, dim, half_to_float=False, *a):
    sh, read_s, acc = _softmax_parts(ctx, x, dim)
    out = result_dtype(node)
    return LTensor(x.shape, out, lambda c: call("div", call("exp", sh(c)), read_s(c)))


@register("aten._log_softmax", "aten.log_softmax")
def _log_softmax(ctx, node, x, dim, half_to_float=False, *a):
    sh, read_s, acc = _softmax_parts(ctx, x, dim)
    out = result_dtype(node)
    return LTensor(x.shape, out, lambda c: call("sub", sh(c), call("log", read_s(c))))


@register("aten.logsumexp")
def _logsumexp(ctx, node, x, dims, keepdim=False):
    acc = _acc_dtype(x.dtype)
    rank = len(x.shape)
    dims = _dims(dims, rank)
    mx = reduce(ctx, x, dims, "max", acc, keepdim=True, base="lmax")
    read_mx = broadcast_back(mx, x.shape)

    def safe_max(c):
        m = read_mx(c)
        return call("where", call("eq", call("abs", m), vals.const(math.inf, acc)), vals.const(0.0, acc), m)
    s = reduce(ctx, x, dims, "sum", acc, value=lambda v, f: call("exp", call("sub", vals.cast(v, acc), safe_max(f))),
               keepdim=True, base="lsum")
    out = LTensor(s.shape, acc, lambda c: call("add", call("log", s(c)), safe_max(c)))
    if keepdim:
        return out
    shape = tuple(n for d, n in enumerate(x.shape) if d not in dims)
    return LTensor(shape, acc, lambda c: out(_reinsert(c, dims, rank)))


def _normalize(ctx, x, dims, eps, weight_fn=None):
    """(out, mean, rstd) with biased variance over `dims` (two passes); weight_fn(v, coords) applies affine."""
    mean, var, dims = _var_parts(ctx, x, dims, 0, True)
    acc = mean.dtype
    read_mean = broadcast_back(mean, x.shape)
    rstd = LTensor(var.shape, acc, lambda c: call("rsqrt", call("add", var(c), vals.const(eps, acc))))
    read_rstd = broadcast_back(rstd, x.shape)

    def f(c):
        v = call("mul", call("sub", vals.cast(x(c), acc), read_mean(c)), read_rstd(c))
        return weight_fn(v, c) if weight_fn else v
    return f, mean, rstd


@register("aten.native_layer_norm")
def _layer_norm(ctx, node, x, normalized_shape, weight, bias, eps):
    rank = len(x.shape)
    k = len(normalized_shape)
    dims = list(range(rank - k, rank))

    def affine(v, c):
        tail = c[rank - k:]
        if weight is not None:
            v = call("mul", v, vals.cast(weight(tail), v.dtype))
        if bias is not None:
            v = call("add", v, vals.cast(bias(tail), v.dtype))
        return v
    f, mean, rstd = _normalize(ctx, x, dims, eps, affine)
    out = LTensor(x.shape, result_dtype(node), f)
    return out, mean, rstd


@register("aten.native_group_norm")
def _group_norm(ctx, node, x, weight, bias, N, C, HxW, group, eps):
    shape = x.shape
    g = C // group
    # (N, C, *S) viewed as (N, G, C/G * S): normalize over the last dim
    from .index import flatten, unflatten
    gshape = (N, group, g * HxW)
    xg = LTensor(gshape, x.dtype, lambda c: x(unflatten(flatten(c, gshape), shape)))
    f, mean, rstd = _normalize(ctx, xg, [2], eps)

    def out(c):
        gc = unflatten(flatten(c, shape), gshape)
        v = f(gc)
        ch = [c[1]]
        if weight is not None:
            v = call("mul", v, vals.cast(weight(ch), v.dtype))
        if bias is not None:
            v = call("add", v, vals.cast(bias(ch), v.dtype))
        return v
    return LTensor(shape, result_dtype(node), out), mean, rstd


@register("aten._native_batch_norm_legit_no_training")
def _bn_eval(ctx, node, x, weight, bias, running_mean, running_var, momentum, eps):
    acc = _acc_dtype(x.dtype)

    def f(c):
        ch = [c[1]]
        v = call("mul", call("sub", vals.cast(x(c), acc), vals.cast(running_mean(ch), acc)),
                 call("rsqrt", call("add", vals.cast(running_var(ch), acc), vals.const(eps, acc))))
        if weight is not None:
            v = call("mul", v, vals.cast(weight(ch), acc))
        if bias is not None:
            v = call("add", v, vals.cast(bias(ch), acc))
        return v
    empty = LTensor((0,), acc, lambda c: vals.const(0.0, acc))
    return LTensor(x.shape, result_dtype(node), f), empty, empty


@register("aten._native_batch_norm_legit", "aten._native_batch_norm_legit_functional")
def _bn_train(ctx, node, x, weight, bias, *rest):
    eps = rest[-1]
    dims = [d for d in range(len(x.shape)) if d != 1]

    def affine(v, c):
        ch = [c[1]]
        if weight is not None:
            v = call("mul", v, vals.cast(weight(ch), v.dtype))
        if bias is not None:
            v = call("add", v, vals.cast(bias(ch), v.dtype))
        return v
    f, mean, rstd = _normalize(ctx, x, dims, eps, affine)
    c1 = x.shape[1]
    m1 = LTensor((c1,), mean.dtype, lambda c: mean([const(0), c[0]] + [const(0)] * (len(x.shape) - 2)))
    r1 = LTensor((c1,), rstd.dtype, lambda c: rstd([const(0), c[0]] + [const(0)] * (len(x.shape) - 2)))
    out = [LTensor(x.shape, result_dtype(node), f), m1, r1]
    n_out = len(node.meta["val"]) if isinstance(node.meta.get("val"), (tuple, list)) else 3
    return tuple(out + [m1] * (n_out - 3))


def _scan(ctx, node, x, dim, kind):
    """Inclusive scan along `dim`: a Scan kernel (tile scans over chunks of the axis plus a carry); a flipped
    input scans in reverse over the unflipped positions (see `Context.scan`)."""
    rank = len(x.shape)
    d = dim + rank if dim < 0 else dim
    out = result_dtype(node)
    acc = _acc_dtype(out) if out.is_floating_point else torch.int64
    if not x.shape or x.shape[d] == 0:
        raise NotImplementedError("a scan of an empty or 0-d tensor")
    red = ctx.scan(kind, x.shape, d, lambda c: vals.cast(x(c), acc), acc, base="cum" + kind)
    return _as(red, out)


@register("aten.cumsum")
def _cumsum(ctx, node, x, dim, dtype=None):
    return _scan(ctx, node, x, dim, "sum")


@register("aten.cumprod")
def _cumprod(ctx, node, x, dim, dtype=None):
    return _scan(ctx, node, x, dim, "prod")


@register("aten.logcumsumexp")
def _logcumsumexp(ctx, node, x, dim):
    """log(cumsum(exp(x))) along `dim`, shifted by the line's max m (as logsumexp): m + log(cumsum(exp(x - m))).
    A prefix whose terms all lie more than ~87 below m underflows to -inf where torch's running logaddexp keeps
    a finite value (rows spanning a dynamic range beyond e^87)."""
    rank = len(x.shape)
    d = dim + rank if dim < 0 else dim
    out = result_dtype(node)
    acc = _acc_dtype(out)
    if not x.shape or x.shape[d] == 0:
        raise NotImplementedError("logcumsumexp of an empty or 0-d tensor")
    mx = reduce(ctx, x, [d], "max", acc, value=lambda v, f: vals.cast(v, acc), keepdim=True, base="lcmax")
    read_mx = broadcast_back(mx, x.shape)

    def safe_max(c):
        m = read_mx(c)
        return call("where", call("eq", call("abs", m), vals.const(math.inf, acc)), vals.const(0.0, acc), m)
    s = ctx.scan("sum", x.shape, d, lambda c: call("exp", call("sub", vals.cast(x(c), acc), safe_max(c))), acc,
                 base="lcsum")
    return LTensor(x.shape, out, lambda c: vals.cast(call("add", call("log", s(c)), safe_max(c)), out))


TOPK_MAX = 32   # k of a topk lowered as k rounds of a (value, first index) row reduction; larger k: a sort


@register("aten.topk")
def _topk(ctx, node, x, k, dim=-1, largest=True, sorted=True):
    """(values, indices) of the k largest (smallest) elements along `dim`, in order: round j takes the extreme
    of the elements no earlier round picked and the first index holding it (torch's order, NaN the largest).
    2k reductions of the same rows (one row-persistent kernel when a row fits); k > TOPK_MAX: the first k of the
    stable sort (O(n^2) per line, lines of at most SORT_MAX)."""
    rank = len(x.shape)
    d = (dim + rank if dim < 0 else dim) if rank else 0
    n = x.shape[d] if rank else 1
    if not rank:
        raise NotImplementedError("topk of a 0-d tensor")
    if k > TOPK_MAX:
        # the first k of the line sorted stably (descending for the largest: NaN first, ties by first index)
        if n > SORT_MAX and x.dtype not in _SORT_AS:
            raise NotImplementedError(f"topk with k = {k} > {TOPK_MAX} of a line of {n} elements (the sorted "
                                      f"line's first k; sort takes lines of at most {SORT_MAX})")
        values, index = _sort(ctx, None, x, d, descending=largest)
        shape = x.shape[:d] + (k,) + x.shape[d + 1:]
        return (LTensor(shape, x.dtype, lambda c: values(c)), LTensor(shape, torch.int64, lambda c: index(c)))
    kind = "max" if largest else "min"
    acc = vals.compute_dtype(x.dtype)
    fill = vals.const(-math.inf if largest else math.inf, acc) if acc.is_floating_point else vals.const(
        torch.iinfo(acc).min if largest else torch.iinfo(acc).max, acc)
    picked, values, indices = [], [], []
    for j in range(k):
        reads = [broadcast_back(t, x.shape) for t in picked]

        def taken(full, reads=reads):
            at, t = vals.index_value(full[d]), None
            for r in reads:
                e = call("eq", r(full), at)
                t = e if t is None else call("or", t, e, dtype=torch.bool)
            return t

        def value(v, full, taken=taken):
            t, v = taken(full), vals.cast(v, acc)
            return v if t is None else call("where", t, fill, v)
        best = reduce(ctx, x, [d], kind, acc, value=value, keepdim=True, base=f"topk{j}")
        read_best = broadcast_back(best, x.shape)

        def first(v, full, taken=taken, read_best=read_best):
            b, v = read_best(full), vals.cast(v, acc)
            hit = call("eq", v, b)
            if acc.is_floating_point:
                hit = call("or", hit, call("and", call("ne", b, b), call("ne", v, v), dtype=torch.bool),
                           dtype=torch.bool)
            none = vals.const(n, torch.int64)
            got = call("where", hit, vals.index_value(full[d]), none, dtype=torch.int64)
            t = taken(full)
            return got if t is None else call("where", t, none, got, dtype=torch.int64)
        idx = reduce(ctx, x, [d], "min", torch.int64, value=first, keepdim=True, base=f"topk{j}_idx")
        picked.append(idx)
        values.append(best)
        indices.append(idx)
    shape = x.shape[:d] + (k,) + x.shape[d + 1:]

    def pick(parts, dtype):
        def fn(c):
            j = vals.index_value(c[d])
            row = c[:d] + [const(0)] + c[d + 1:]
            out = vals.cast(parts[-1](row), dtype)
            for q in range(len(parts) - 2, -1, -1):
                out = call("where", call("eq", j, vals.const(q, torch.int64)), vals.cast(parts[q](row), dtype), out,
                           dtype=dtype)
            return out
        return LTensor(shape, dtype, fn)
    return pick(values, x.dtype), pick(indices, torch.int64)


SORT_MAX = 16384   # longest line sorted (two O(n^2) reductions per line)


@dataclass
class SortTemplate:
    """out (R, M) and indices (R, M) int64: the rows of x (R, N) sorted by `stdlib_kernels/sort.py` (a bitonic
    network per row in registers, stable, NaN largest); x and out are float32 (passed as their int32 bits) or
    int32; M = N, or 1 with `pick` >= 0 (only that position of each sorted row; `nan_first`: a row holding a
    NaN picks its first NaN, torch.median's rule)."""

    out: Buffer
    indices: Buffer
    x: Buffer
    R: int
    N: int
    descending: bool = False
    pick: int = -1
    nan_first: bool = False
    what: str = ""
    write_indices: bool = True   # False: nothing reads the indices (the kernel does not store them)


def sort_params(t: SortTemplate) -> dict:
    """The constexprs sort_rows runs with for this template."""
    from stdlib_kernels.sort import shape_of

    L, VB, threads, rb = shape_of(t.N)
    return {"L": L, "VB": VB, "THREADS": threads, "RB": rb, "FLOAT": t.x.dtype == torch.float32,
            "DESC": t.descending, "PICK": t.pick, "NAN_FIRST": t.nan_first, "WRITE_I": t.write_indices}


def sort_source(t: SortTemplate) -> str:
    """stdlib_kernels/sort.py's kernel with this (the program's first) launch's constexprs as its defaults: the
    agent's build and verify gates take kernels at their defaults, so they check what runs."""
    from .templates import stdlib_source, with_defaults

    return with_defaults(stdlib_source("sort"), sort_params(t), kernel="sort_rows")


def render_sort(t: SortTemplate) -> list[str]:
    if t.R == 0:
        return []
    p = sort_params(t)
    m = t.N if t.pick < 0 else 1
    bits = ".view(torch.int32)" if p["FLOAT"] else ""
    kw = ", ".join(f"{k}={v!r}" for k, v in p.items())
    return [f"launch(sort_rows, ({-(-t.R // p['RB'])},), {t.x.name}.view({t.R}, {t.N}){bits}, "
            f"{t.out.name}.view({t.R}, {m}){bits}, {t.indices.name}.view({t.R}, {m}), {kw})"]


_SORT_AS = {torch.float32: torch.float32, torch.float16: torch.float32, torch.bfloat16: torch.float32,
            torch.int32: torch.int32, torch.int16: torch.int32, torch.int8: torch.int32, torch.uint8: torch.int32,
            torch.bool: torch.int32}


def sorted_rows(ctx, x, d, descending=False, pick=-1, nan_first=False, indices=True):
    """x's lines along d as (R, N) rows sorted by the stdlib bitonic row sort: (values Buffer (R, M) of float32
    or int32, indices Buffer (R, M) int64, the other dims' shape), M = N or 1 with pick >= 0; row r is the flat
    index of the other dims. None where the kernel does not apply (lines longer than its SORT_MAX, element types
    it cannot key exactly: float64, int64). The rows are copied into an (R, N) buffer of float32 or int32 (exact
    for every type it takes) unless x is one already."""
    from stdlib_kernels.sort import SORT_MAX as ROW_MAX

    from .index import unflatten

    n = x.shape[d]
    kdt = _SORT_AS.get(x.dtype)
    if kdt is None or not 1 <= n <= ROW_MAX or x.numel == 0 or x.numel >= 2**31:
        return None
    other = x.shape[:d] + x.shape[d + 1:]
    R = x.numel // n

    def row(c):
        oc = unflatten(c[0], other) if other else []
        return vals.cast(x(list(oc[:d]) + [c[1]] + list(oc[d:])), kdt)
    vb, ib = _sort_matrix(ctx, LTensor((R, n), kdt, row), descending, pick, nan_first, indices)
    return vb, ib, other


def _sort_matrix(ctx, rows: LTensor, descending=False, pick=-1, nan_first=False, indices=True):
    """(values, indices) Buffers of the (R, N) rows (float32 or int32) sorted by one SortTemplate launch (the rows
    copied into a buffer of their own unless they are one already)."""
    R, n = rows.shape
    xb = ctx.contiguous(rows, "sort_in")
    m = n if pick < 0 else 1
    vb = ctx.add_buffer("sorted", (R, m), rows.dtype)
    ib = ctx.add_buffer("sort_idx", (R, m), torch.int64)
    ctx.kernels.append(SortTemplate(vb, ib, xb.buffer, R, n, bool(descending), pick, nan_first, ctx.note,
                                    indices))
    return vb, ib


def _radix64(ctx, x, d, descending=False):
    """(values, indices) of an int64 x sorted along d (stable; descending: ascending of the complement ~x) by two
    runs of the bitonic row sort, least significant word first (an LSD radix sort of two 32-bit digits): the
    rows' low words (as signed: lo - 2^31) sorted, then the high words (x >> 32) read in that order sorted
    stably, the index the first order at the second's positions. None past the kernel's rows."""
    from stdlib_kernels.sort import SORT_MAX as ROW_MAX

    from .index import flatten, unflatten
    from .ops_views import _load_at

    n = x.shape[d]
    if x.dtype != torch.int64 or not 1 <= n <= ROW_MAX or x.numel == 0 or x.numel >= 2**31:
        return None
    other = x.shape[:d] + x.shape[d + 1:]
    R = x.numel // n
    i64, i32 = torch.int64, torch.int32

    def key(c):              # the value sorted ascending
        oc = unflatten(c[0], other) if other else []
        v = vals.cast(x(list(oc[:d]) + [c[1]] + list(oc[d:])), i64)
        return call("invert", v, dtype=i64) if descending else v
    keys = ctx.contiguous(LTensor((R, n), i64, key), "sort_key64")
    def lo(c):               # the low word as a signed int32 of the same order
        word = call("and", keys(c), vals.const(0xFFFFFFFF, i64), dtype=i64)
        return vals.cast(call("sub", word, vals.const(2**31, i64), dtype=i64), i32)
    lo = LTensor((R, n), i32, lo)
    _, p1 = _sort_matrix(ctx, lo)
    P1 = buffer_tensor(p1)

    def hi(c):
        k = _load_at(keys, [c[0], None], [(1, vals.cast(P1(c), i64))])
        return vals.cast(call("rshift", vals.cast(k, i64), vals.const(32, i64), dtype=i64), i32)
    _, p2 = _sort_matrix(ctx, LTensor((R, n), i32, hi))
    P2 = buffer_tensor(p2)
    order = ctx.realize(LTensor((R, n), i64, lambda c: vals.cast(_load_at(P1, [c[0], None], [(1, vals.cast(
        P2(c), i64))]), i64)), "sort_order64")

    def back_index(c):
        r = flatten(list(c[:d]) + list(c[d + 1:]), other) if other else const(0)
        return vals.cast(order([r, c[d]]), i64)
    index = LTensor(x.shape, i64, back_index)
    xb = ctx.realize(x, "sort_in64")

    def value(c):
        coords = list(c)
        coords[d] = None
        return _load_at(xb, coords, [(d, index(c))])
    return LTensor(x.shape, x.dtype, value), index


def _merge_sorted(ctx, x, d, descending=False):
    """(values, indices) of x sorted along d for lines longer than the bitonic kernel's rows (float32-keyable
    types): the line cut into runs of SORT_MAX (and a shorter last one), each sorted by the kernel, then merged
    pairwise through global memory. A merge of sorted runs A (la) and B (lb), A's elements earlier in the line,
    computes each output position p by the merge path: i = how many of the first p outputs come from A is the
    largest i in [max(0, p - lb), min(p, la)] with i == 0, p - i == lb or A[i-1] <= B[p-i] (a binary search,
    two gathers a round); the output is A[i] if A[i] <= B[p-i] (ties: A first, which keeps the sort stable), else
    B[p-i]. NaN is the largest value (first when descending), as in the kernel. O(n log n) a merge level; None
    where the kernel does not apply."""
    from stdlib_kernels.sort import SORT_MAX as ROW_MAX

    from .index import flatten, unflatten
    from .ops_views import _load_at

    n = x.shape[d]
    kdt = _SORT_AS.get(x.dtype)
    if kdt is None or n <= ROW_MAX or x.numel >= 2**31:
        return None
    other = x.shape[:d] + x.shape[d + 1:]
    R = x.numel // n
    q, rem = divmod(n, ROW_MAX)
    i64 = torch.int64

    def piece(count, length, start):      # rows (R * count, length): run c of line r at row r * count + c
        def g(c):
            rr = c[0]
            r, run = (rr // count, rr % count) if count > 1 else (rr, const(0))
            oc = unflatten(r, other) if other else []
            pos = run * length + c[1] + start
            return vals.cast(x(list(oc[:d]) + [pos] + list(oc[d:])), kdt)
        return _sort_matrix(ctx, LTensor((R * count, length), kdt, g), descending)

    runs = []     # (values LTensor-buffer, indices buffer tensor, row of line r, first line position, length)
    vb, ib = piece(q, ROW_MAX, 0)
    for c in range(q):
        runs.append((buffer_tensor(vb), buffer_tensor(ib), (lambda r, c=c: r * q + c), c * ROW_MAX, ROW_MAX))
    if rem:
        vb, ib = piece(1, rem, q * ROW_MAX)
        runs.append((buffer_tensor(vb), buffer_tensor(ib), (lambda r: r), q * ROW_MAX, rem))
    acc = vals.compute_dtype(kdt)

    def i(v):
        return vals.const(v, i64)

    def le(a, b):      # a <= b in the sort's order: b does not come strictly before a
        before = call("gt" if descending else "lt", b, a)
        if acc.is_floating_point:   # NaN the largest: last ascending, first descending
            nan_a, nan_b = call("ne", a, a), call("ne", b, b)
            before = call("or", before, call("and", nan_b, call("eq", a, a), dtype=torch.bool) if descending
                          else call("and", nan_a, call("eq", b, b), dtype=torch.bool), dtype=torch.bool)
        return call("logical_not", before, dtype=torch.bool)

    def at(run, r, pos):
        V, _, row, _, length = run
        pos = call("maximum", call("minimum", pos, i(length - 1), dtype=i64), i(0), dtype=i64)
        return vals.cast(_load_at(V, [row(r), None], [(1, pos)]), acc)

    def merge(A, B):
        la, lb = A[4], B[4]
        rounds = max(1, math.ceil(math.log2(min(la, lb) + 2)))

        def take(c):          # i: how many of the first p outputs come from A
            r, p = c[0], vals.index_value(c[1])
            lo = call("maximum", call("sub", p, i(lb), dtype=i64), i(0), dtype=i64)
            hi = call("minimum", p, i(la), dtype=i64)
            for _ in range(rounds):    # the largest i in [lo, hi] with g(i); g(lo) holds
                mid = call("floordiv", call("add", call("add", lo, hi, dtype=i64), i(1), dtype=i64), i(2), dtype=i64)
                j = call("sub", p, mid, dtype=i64)
                ok = call("or", call("eq", j, i(lb)), le(at(A, r, call("sub", mid, i(1), dtype=i64)), at(B, r, j)),
                          dtype=torch.bool)
                ok = call("and", ok, call("lt", lo, hi), dtype=torch.bool)
                lo = call("where", ok, mid, lo, dtype=i64)
                hi = call("where", call("or", ok, call("ge", lo, hi), dtype=torch.bool), hi,
                          call("sub", mid, i(1), dtype=i64), dtype=i64)
            j = call("sub", p, lo, dtype=i64)
            from_a = call("and", call("lt", lo, i(la)), call("or", call("eq", j, i(lb)), le(at(A, r, lo), at(B, r, j)),
                                                              dtype=torch.bool), dtype=torch.bool)
            return call("where", from_a, lo, call("add", i(la), j, dtype=i64), dtype=i64)
        src = ctx.realize(LTensor((R, la + lb), i64, take), "merge_src")

        def pick(c, what):
            r = c[0]
            s_ = src([r, c[1]])
            in_a = call("lt", s_, i(la))
            if what == "v":
                return call("where", in_a, at(A, r, s_), at(B, r, call("sub", s_, i(la), dtype=i64)), dtype=acc)
            ia = vals.cast(_load_at(A[1], [A[2](r), None], [(1, call("minimum", s_, i(la - 1), dtype=i64))]), i64)
            jb = call("maximum", call("sub", s_, i(la), dtype=i64), i(0), dtype=i64)
            ib_ = vals.cast(_load_at(B[1], [B[2](r), None], [(1, call("minimum", jb, i(lb - 1), dtype=i64))]), i64)
            return call("where", in_a, call("add", ia, i(A[3]), dtype=i64), call("add", ib_, i(B[3]), dtype=i64),
                        dtype=i64)
        mv = ctx.realize(LTensor((R, la + lb), kdt, lambda c: vals.cast(pick(c, "v"), kdt)), "merged")
        mi = ctx.realize(LTensor((R, la + lb), i64, lambda c: pick(c, "i")), "merged_idx")
        return (mv, mi, (lambda r: r), 0, la + lb)

    while len(runs) > 1:
        runs = [merge(runs[k], runs[k + 1]) if k + 1 < len(runs) else runs[k] for k in range(0, len(runs), 2)]
    V, I, _, _, _ = runs[0]

    def back(t, dtype):
        def f(c):
            r = flatten(list(c[:d]) + list(c[d + 1:]), other) if other else const(0)
            return vals.cast(t([r, c[d]]), dtype)
        return LTensor(x.shape, dtype, f)
    return back(V, x.dtype), back(I, i64)


def _bitonic(ctx, x, d, descending=False, pick=-1, nan_first=False, indices=True):
    """(values, indices) of x sorted along d by `sorted_rows` (over x's shape; with pick >= 0 only that position,
    d kept as size 1), or None where it does not apply."""
    from .index import flatten

    got = sorted_rows(ctx, x, d, descending, pick, nan_first, indices)
    if got is None:
        return None
    vb, ib, other = got
    shape = x.shape if pick < 0 else x.shape[:d] + (1,) + x.shape[d + 1:]

    def back(buf, dtype):
        t = buffer_tensor(buf)

        def f(c):
            r = flatten(list(c[:d]) + list(c[d + 1:]), other) if other else const(0)
            return vals.cast(t([r, c[d]]), dtype)
        return LTensor(shape, dtype, f)
    return back(vb, x.dtype), back(ib, torch.int64)


@register("aten.sort")
def _sort(ctx, node, x, dim=-1, descending=False, *, stable=None):
    """(values, indices) of x sorted along `dim` (stable: equal elements keep their order; NaN the largest, as
    torch). float32 / float16 / bfloat16 / int32 / int8 / bool: the stdlib bitonic row sort (`_bitonic`), lines
    longer than its rows in sorted runs merged pairwise (`_merge_sorted`); int64 lines of up to its rows: two
    runs, low word then high word (`_radix64`). Otherwise (float64, longer int64 lines) each
    element's rank is the count of elements before it in that order (a reduction over the line), the index at
    position p the one element of rank p (a second reduction), the values a gather there: O(n^2) per line,
    correct, not fast; such lines longer than SORT_MAX are refused."""
    from .ops_views import _load_at

    rank = len(x.shape)
    if not rank:
        raise NotImplementedError("sort of a 0-d tensor")
    d = dim + rank if dim < 0 else dim
    n = x.shape[d]
    fast = _bitonic(ctx, x, d, descending, indices=node is None or not _unused_output(node, 1))
    if fast is None:
        fast = _merge_sorted(ctx, x, d, descending) or _radix64(ctx, x, d, descending)
    if fast is not None:
        return fast
    if n > SORT_MAX:
        raise NotImplementedError(f"sort along a dim of {n} elements (lowered as O(n^2) ranks, n <= {SORT_MAX})")
    acc = vals.compute_dtype(x.dtype)
    xb = ctx.realize(x, "sort_in")

    def at(c, j):
        return c[:d] + [j] + c[d + 1:]

    def before(a, b, ia, ib):
        """Element a (line position ia) comes strictly before b (ib) in the sorted order."""
        strict = call("gt" if descending else "lt", a, b)
        tie = call("eq", a, b)
        if acc.is_floating_point:
            nan_a, nan_b = call("ne", a, a), call("ne", b, b)
            first_nan = call("and", nan_a, call("eq", b, b), dtype=torch.bool) if descending else call(
                "and", nan_b, call("eq", a, a), dtype=torch.bool)
            strict = call("or", strict, first_nan, dtype=torch.bool)
            tie = call("or", tie, call("and", nan_a, nan_b, dtype=torch.bool), dtype=torch.bool)
        return call("or", strict, call("and", tie, call("lt", ia, ib), dtype=torch.bool), dtype=torch.bool)

    one, zero = vals.const(1, torch.int64), vals.const(0, torch.int64)

    def rank_fn(oc, rc):
        a, b = vals.cast(xb(at(oc, rc[0])), acc), vals.cast(xb(oc), acc)
        return call("where", before(a, b, vals.index_value(rc[0]), vals.index_value(oc[d])), one, zero,
                    dtype=torch.int64)
    ranks = ctx.reduce("sum", x.shape, (n,), rank_fn, torch.int64, base="sort_rank")

    def index_fn(oc, rc):
        hit = call("eq", ranks(at(oc, rc[0])), vals.index_value(oc[d]))
        return call("where", hit, vals.index_value(rc[0]), zero, dtype=torch.int64)
    index = ctx.reduce("sum", x.shape, (n,), index_fn, torch.int64, base="sort_index")

    def value(c):
        coords = list(c)
        coords[d] = None
        return _load_at(xb, coords, [(d, index(c))])
    return LTensor(x.shape, x.dtype, value), index


def _sorted_at(ctx, x, d, q, keepdim, nan_first=False):
    """(value, index) of the element at position q of x sorted ascending along d (stable), d dropped or kept;
    `nan_first`: a line holding a NaN gives NaN and the index of its first NaN (torch.median): in the bitonic
    kernel where it runs, else from a reduction over the line (the first NaN's index)."""
    fast = _bitonic(ctx, x, d, pick=q, nan_first=nan_first)
    if fast is not None:
        values, index = fast
        q = 0
    else:
        values, index = _sort(ctx, None, x, d)

    def pick(t):
        shape = tuple(n for k, n in enumerate(x.shape) if k != d)
        if keepdim:
            return LTensor(x.shape[:d] + (1,) + x.shape[d + 1:], t.dtype, lambda c: t(c[:d] + [const(q)] + c[d + 1:]))
        return LTensor(shape, t.dtype, lambda c: t(c[:d] + [const(q)] + c[d:]))
    v, i = pick(values), pick(index)
    if fast is not None or not nan_first or not x.dtype.is_floating_point:
        return v, i
    n = x.shape[d]
    i64 = torch.int64

    def first_nan(v_, full):
        return call("where", call("ne", v_, v_), vals.index_value(full[d]), vals.const(n, i64), dtype=i64)
    nan_at = reduce(ctx, x, [d], "min", i64, value=first_nan, keepdim=keepdim, base="median_nan")
    has = lambda c: call("lt", nan_at(c), vals.const(n, i64))   # noqa: E731
    return (LTensor(v.shape, v.dtype, lambda c: call("where", has(c), vals.const(math.nan, vals.compute_dtype(
                v.dtype)), v(c))),
            LTensor(i.shape, i64, lambda c: call("where", has(c), nan_at(c), i(c), dtype=i64)))


@register("aten.median.dim", "aten.kthvalue")
def _median_dim(ctx, node, x, *args, **kw):
    """median along a dim (the lower median, torch's) and kthvalue (the k-th smallest): the sorted line's
    element at (n - 1) // 2 or k - 1, with its index (median: a line holding a NaN gives its first NaN, as
    torch; kthvalue sorts NaN largest)."""
    kth = str(node.target).startswith("aten.kthvalue")
    names = ("k", "dim", "keepdim") if kth else ("dim", "keepdim")
    given = dict(zip(names, args), **kw)
    rank = len(x.shape)
    dim = given.get("dim", -1)
    d = (dim + rank if dim < 0 else dim) if rank else 0
    if not rank:
        raise NotImplementedError(f"{'kthvalue' if kth else 'median'} of a 0-d tensor")
    q = given["k"] - 1 if kth else (x.shape[d] - 1) // 2
    return _sorted_at(ctx, x, d, q, bool(given.get("keepdim", False)), nan_first=not kth)


@register("aten.median.default")
def _median_all(ctx, node, x):
    """The lower median of all elements (a 0-d tensor)."""
    from .index import unflatten

    flat = LTensor((x.numel,), x.dtype, lambda c: x(unflatten(c[0], x.shape)))
    value, _ = _sorted_at(ctx, flat, 0, (x.numel - 1) // 2, False, nan_first=True)
    return value


@register("aten.nanmedian.dim", "aten.nanmedian.default")
def _nanmedian(ctx, node, x, dim=None, keepdim=False):
    """torch.nanmedian: the lower median of each line's non-NaN values (NaN sorts last, so it is the sorted
    line's element at (c - 1) // 2 for c non-NaN values, a run-time position), with its index; a line of NaNs
    only gives NaN (at the line's middle position: torch's CPU kernel indexes some NaN of its own choosing).
    Without a dim: of all elements, a 0-d value."""
    from .index import flatten, unflatten
    from .ops_views import _load_at

    i64 = torch.int64
    if dim is None:
        src = x
        x = LTensor((src.numel,), src.dtype, lambda c: src(unflatten(c[0], src.shape)))
        d = 0
    else:
        d = dim + len(x.shape) if dim < 0 else dim
    n = x.shape[d]
    other = x.shape[:d] + x.shape[d + 1:]
    got = sorted_rows(ctx, x, d) if x.dtype.is_floating_point else None
    if got is not None:
        vb, ib, _ = got
        V, I = buffer_tensor(vb), buffer_tensor(ib)

        def row(oc):
            return [flatten(list(oc), other) if other else const(0), None]
        dim_ = 1
    else:                 # the generic sort, its results copied to buffers to read at run-time positions
        values, index = _sort(ctx, None, x, d)
        V, I = ctx.realize(values, "nanmedian_v"), ctx.realize(index, "nanmedian_i")

        def row(oc):
            return list(oc[:d]) + [None] + list(oc[d:])
        dim_ = d
    ok = (lambda v, full: call("where", call("eq", v, v), vals.const(1, i64), vals.const(0, i64), dtype=i64)) \
        if x.dtype.is_floating_point else (lambda v, full: vals.const(1, i64))
    count = reduce(ctx, x, [d], "sum", i64, value=ok, base="nanmedian_count")

    def at(oc):
        c = count(list(oc))
        return call("where", call("gt", c, vals.const(0, i64)),
                    call("floordiv", call("sub", c, vals.const(1, i64), dtype=i64), vals.const(2, i64), dtype=i64),
                    vals.const((n - 1) // 2, i64), dtype=i64)
    shape = other if not keepdim or dim is None else x.shape[:d] + (1,) + x.shape[d + 1:]

    def out(t, dtype):
        def f(c):
            oc = list(c) if (not keepdim or dim is None) else list(c[:d]) + list(c[d + 1:])
            return vals.cast(_load_at(t, row(oc), [(dim_, at(oc))]), dtype)
        return LTensor(shape, dtype, f)
    if dim is None:
        return out(V, x.dtype)
    return out(V, x.dtype), out(I, i64)


@register("aten._cdist_forward")
def _cdist(ctx, node, x1, x2, p=2.0, compute_mode=None):
    """torch.cdist: out[..., i, j] = ||x1[..., i, :] - x2[..., j, :]||_p, a reduction over the feature dim of
    |difference|^p (p = 0: the count of differing features, inf: the largest difference), then the 1/p power.
    Computed directly, never by torch's matmul form for large inputs (more accurate, not faster)."""
    shape = result_shape(node)
    nb = len(shape) - 2
    m = x1.shape[-1]
    acc = _acc_dtype(result_dtype(node))
    kind = "max" if p == math.inf else "sum"

    def fn(oc, rc):
        b, i, j = list(oc[:nb]), oc[nb], oc[nb + 1]
        a = vals.cast(x1(broadcast_coords(b + [i, rc[0]], x1.shape, shape[:nb] + (x1.shape[-2], m))), acc)
        c = vals.cast(x2(broadcast_coords(b + [j, rc[0]], x2.shape, shape[:nb] + (x2.shape[-2], m))), acc)
        d = call("abs", call("sub", a, c))
        if p == 0:
            return vals.cast(call("ne", d, vals.const(0.0, acc)), acc)
        if p in (1, math.inf):
            return d
        if p == 2:
            return call("mul", d, d)
        return call("pow", d, vals.const(float(p), acc))
    red = ctx.reduce(kind, shape, (m,), fn, acc, base="cdist")
    if p in (0, 1, math.inf):
        return red
    if p == 2:
        return LTensor(shape, acc, lambda c: call("sqrt", red(c)))
    return LTensor(shape, acc, lambda c: call("pow", red(c), vals.const(1.0 / p, acc)))


@register("aten._trilinear")
def _trilinear(ctx, node, i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """torch._trilinear (nn.Bilinear / F.bilinear): each operand gets size-1 dims at its `expand` positions,
    the three broadcast and multiply, and the product is summed over `sumdim`: one Reduction kernel whose
    element is the product of three loads (x1[b, i] W[o, i, j] x2[b, j] for a bilinear layer)."""
    ops = [(i1, set(expand1)), (i2, set(expand2)), (i3, set(expand3))]
    rank = len(i1.shape) + len(expand1)
    shapes = []
    for t, ex in ops:
        it = iter(t.shape)
        shapes.append([1 if d in ex else next(it) for d in range(rank)])
    full = [max(s[d] for s in shapes) for d in range(rank)]
    sums = sorted(d % rank for d in sumdim)
    keep = [d for d in range(rank) if d not in sums]
    dtype = result_dtype(node)
    cdt = vals.compute_dtype(dtype)

    def element(oc, rc):
        coords = {d: c for d, c in zip(keep, oc)}
        coords.update({d: c for d, c in zip(sums, rc)})
        v = None
        for (t, ex), shape in zip(ops, shapes):
            c = [coords[d] if shape[d] != 1 else const(0) for d in range(rank) if d not in ex]
            x = vals.cast(t(c), cdt)
            v = x if v is None else call("mul", v, x, dtype=cdt)
        return v
    if not sums:
        return LTensor(tuple(full[d] for d in keep), dtype, lambda c: element(c, []))
    return ctx.reduce("sum", tuple(full[d] for d in keep), tuple(full[d] for d in sums), element, dtype,
                      base="trilinear")
