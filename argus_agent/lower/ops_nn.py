"""Matmul family, convolution (direct, transposed, grouped, strided, padded, dilated) and pooling.

Each is a reduction whose element reads index the operands: transposed operands are index maps, not copies;
padding and transposed-convolution holes are load conditions (the element reads 0, or -inf for max pooling).
"""

from __future__ import annotations

import math

import torch

from . import values as vals
from .core import LTensor, buffer_tensor
from .index import Sum, Var, add, const, floordiv
from .registry import register, result_dtype, result_shape
from .templates import Fp32GemmTemplate, MatmulTemplate, fp32_gemm_ok, gemm_for
from .values import call


def _acc(dtype):
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def matmul(ctx, a: LTensor, b: LTensor, out_dtype, base="mm") -> LTensor:
    """(..., M, K) @ (..., K, N) with equal batch shapes."""
    batch = a.shape[:-2]
    M, K = a.shape[-2:]
    N = b.shape[-1]
    acc = _acc(out_dtype)
    nb = len(batch)
    nbatch = math.prod(batch) if batch else 1
    if a.dtype == b.dtype == torch.float32 and fp32_gemm_ok(ctx.target, M, N, K, nbatch):
        return _fp32_gemm(ctx, a, b, batch, M, N, K, base)
    gemm = gemm_for(ctx.target, a.dtype, M, N, K) if not batch and a.dtype == b.dtype else None
    if gemm is not None:
        ab, bb = ctx.contiguous(a, "mm_a"), ctx.contiguous(b, "mm_b")
        buf = ctx.add_buffer(base, (M, N), torch.float32)
        ctx.kernels.append(MatmulTemplate(buf, ab.buffer, bb.buffer, M, N, K, gemm, ctx.note))
        return buffer_tensor(buf)

    def fn(oc, rc):
        bc, m, n = oc[:nb], oc[nb], oc[nb + 1]
        k = rc[0]
        return call("mul", vals.cast(a(bc + [m, k]), acc), vals.cast(b(bc + [k, n]), acc))
    return ctx.reduce("sum", batch + (M, N), (K,), fn, acc, base=base, matmul=True)


def _strides(t: LTensor):
    """(buffer, strides, offset) when `t` reads a buffer at an affine index of its coordinates, else None."""
    if t.buffer is None and not t.shape:
        return None
    names = [f"d{k}" for k in range(len(t.shape))]
    coords = [Var(nm, n) if n > 1 else const(0) for nm, n in zip(names, t.shape)]
    v = t(coords)
    if v.op != "load" or v.args[2]:
        return None
    idx = v.args[1]
    terms = [(1, idx)] if isinstance(idx, Var) else list(idx.terms) if isinstance(idx, Sum) else None
    if terms is None or any(not isinstance(a, Var) for _, a in terms):
        return None
    by = {a.name: c for c, a in terms}
    strides = [by.get(nm, 0) for nm in names]
    return v.args[0], strides, (idx.c if isinstance(idx, Sum) else 0)


def _fp32_gemm(ctx, a, b, batch, M, N, K, base):
    """a @ b through the fp32-accurate tensor-core GEMM; operands read in place where their layout allows."""
    nbatch = math.prod(batch) if batch else 1
    bufs = {x.name: x for x in ctx.buffers}
    sa = _strides(a)
    if not (sa and sa[2] == 0 and sa[1][-1] == 1 and (M == 1 or sa[1][-2] == K)
            and all(s == st for s, st in zip(sa[1][:-2], _contig(batch + (M, K))[:-2]))):
        a = ctx.contiguous(LTensor(a.shape, a.dtype, a._fn), "mm_a")
        sa = (a.buffer.name, None, 0)
    sb = _strides(b)
    layout, bb = None, nbatch
    if sb and sb[2] == 0:
        st = sb[1]
        zs = st[:-2]
        bb = 1 if all(z == 0 for z in zs) else nbatch
        if bb == nbatch and any(z != c for z, c in zip(zs, _contig(batch + (K, N))[:-2])):
            bb = None
        if bb is not None and bufs[sb[0]].numel == bb * K * N:
            if (K == 1 or st[-2] == N) and (N == 1 or st[-1] == 1):
                layout = "kn"
            elif (K == 1 or st[-2] == 1) and (N == 1 or st[-1] == K):
                layout = "nk"
    if layout is None:
        b = ctx.contiguous(LTensor(b.shape, b.dtype, b._fn), "mm_b")
        sb, layout, bb = (b.buffer.name, None, 0), "kn", nbatch
    out = ctx.add_buffer(base, batch + (M, N), torch.float32)
    bufs = {x.name: x for x in ctx.buffers}
    ctx.kernels.append(Fp32GemmTemplate(out, bufs[sa[0]], bufs[sb[0]], nbatch, M, N, K, bb, layout, ctx.note))
    return buffer_tensor(out)


def _contig(shape):
    from .index import contiguous_strides
    return list(contiguous_strides(shape))


@register("aten.mm", "aten.bmm", "aten.matmul")
def _mm(ctx, node, a, b):
    out = result_dtype(node)
    r = matmul(ctx, a, b, out)
    return r if r.dtype == out else LTensor(r.shape, out, lambda c: vals.cast(r(c), out))


@register("aten.mv")
def _mv(ctx, node, a, v):
    vb = LTensor((v.shape[0], 1), v.dtype, lambda c: v([c[0]]))
    r = matmul(ctx, a, vb, result_dtype(node), base="mv")
    return LTensor((a.shape[0],), r.dtype, lambda c: r([c[0], const(0)]))


@register("aten.addmm", "aten.baddbmm")
def _addmm(ctx, node, bias, a, b, beta=1, alpha=1):
    out = result_dtype(node)
    r = matmul(ctx, a, b, out)
    acc = r.dtype
    shape = r.shape

    def f(c):
        v = r(c)
        if alpha != 1:
            v = call("mul", v, vals.const(alpha, acc))
        if beta != 0:
            lead = len(shape) - len(bias.shape)
            bc = [const(0) if bias.shape[d] == 1 else c[lead + d] for d in range(len(bias.shape))]
            bv = vals.cast(bias(bc), acc)
            v = call("add", v, bv if beta == 1 else call("mul", bv, vals.const(beta, acc)))
        return vals.cast(v, out)
    return LTensor(shape, out, f)


def _in_range(e, n):
    return [("ge0", e), ("lt", e, n)]


@register("aten.convolution")
def _convolution(ctx, node, x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    shape = result_shape(node)
    out = result_dtype(node)
    acc = _acc(out)
    nsp = len(x.shape) - 2
    stride, padding, dilation = (list(v) * (nsp if len(v) == 1 else 1) for v in (stride, padding, dilation))
    xb, wb = ctx.realize(x, "conv_in"), ctx.realize(w, "conv_w")
    xbuf, wbuf = xb.buffer, wb.buffer
    N, Ci = x.shape[:2]
    Co = shape[1]
    ksz = list(w.shape[2:])
    cig = Ci // groups
    cog = Co // groups
    isz = list(x.shape[2:])
    from .index import flatten

    def fn(oc, rc):
        n, co, osp = oc[0], oc[1], oc[2:]
        ci_l, ks = rc[0], rc[1:]
        grp = floordiv(co, cog)
        ci = add(ci_l, grp * cig)
        conds = []
        isp = []
        for d in range(nsp):
            if not transposed:
                e = add(add(osp[d] * stride[d], const(-padding[d])), ks[d] * dilation[d])
                conds += _in_range(e, isz[d])
                isp.append(e)
            else:
                t = add(add(osp[d], const(padding[d])), ks[d] * (-dilation[d]))
                if stride[d] > 1:
                    conds.append(("div", t, stride[d]))
                e = floordiv(t, stride[d]) if stride[d] > 1 else t
                conds += _in_range(e, isz[d])
                isp.append(e)
        xv = vals.load(xbuf.name, flatten([n, ci] + isp, x.shape), xbuf.dtype, tuple(conds))
        if not transposed:
            wi = flatten([co, ci_l] + list(ks), w.shape)
        else:
            co_l = add(co, grp * (-cog))
            wi = flatten([ci, co_l] + list(ks), w.shape)
        wv = vals.load(wbuf.name, wi, wbuf.dtype)
        return call("mul", vals.cast(xv, acc), vals.cast(wv, acc))
    osz = list(shape[2:])
    npix, kred = N * math.prod(osz), cig * math.prod(ksz)
    if (x.dtype == w.dtype == torch.float32 and fp32_gemm_ok(ctx.target, npix, cog, kred, groups)
            and groups * npix * kred <= 2**30):
        red = _conv_as_gemm(ctx, fn, shape, groups, N, osz, cig, ksz, cog, Co, w, wbuf, transposed)
    else:
        red = ctx.reduce("sum", shape, [cig] + ksz, fn, acc, base="conv")
    if bias is None:
        return red if out == acc else LTensor(shape, out, lambda c: vals.cast(red(c), out))
    return LTensor(shape, out, lambda c: vals.cast(call("add", red(c), vals.cast(bias([c[1]]), acc)), out))


def _conv_as_gemm(ctx, fn, shape, groups, N, osz, cig, ksz, cog, Co, w, wbuf, transposed):
    """A convolution as a GEMM per group: the im2col matrix (G, pixels, Cin/G * kernel) gathered once, times
    the weight read as (G, Cout/G, Cin/G * kernel) (in place for a direct convolution), on the fp32-accurate
    tensor-core GEMM. The product of the reduction's element function (x * w) is split into its two loads."""
    from .index import flatten, unflatten
    npix, kred = N * math.prod(osz), cig * math.prod(ksz)

    def operands(g, pix, kr):
        oc = unflatten(pix, [N] + osz)
        rc = unflatten(kr, [cig] + ksz)
        prod = fn([oc[0], add(g * cog, const(0))] + oc[1:], rc)
        return prod.args[0], prod.args[1]     # (x element, w element), as cast to the accumulator type

    a = LTensor((groups, npix, kred), torch.float32, lambda c: operands(c[0], c[1], c[2])[0])
    if not transposed:
        wk = list(w.shape[1:])

        def wval(c):
            return vals.load(wbuf.name, flatten([add(c[0] * cog, c[2])] + unflatten(c[1], wk), w.shape), wbuf.dtype)
    else:
        def wval(c):
            return operands_w(c)

        def operands_w(c):
            rc = unflatten(c[1], [cig] + ksz)
            ci = add(rc[0], c[0] * cig)
            return vals.load(wbuf.name, flatten([ci, c[2]] + rc[1:], w.shape), wbuf.dtype)
    b = LTensor((groups, kred, cog), torch.float32, wval)
    prod = _fp32_gemm(ctx, a, b, (groups,), npix, cog, kred, "conv")
    P = math.prod(osz)

    def out(c):
        n, co, osp = c[0], c[1], c[2:]
        pix = add(n * P, flatten(osp, osz))
        return prod([floordiv(co, cog), pix, add(co, floordiv(co, cog) * -cog)])
    return LTensor(shape, torch.float32, out)


def _pool_windows(x, shape, kernel, stride, padding, dilation):
    nsp = len(kernel)
    lead = len(x.shape) - nsp

    def coords(oc, rc):
        conds, isp = [], []
        for d in range(nsp):
            e = add(add(oc[lead + d] * stride[d], const(-padding[d])), rc[d] * dilation[d])
            conds += _in_range(e, x.shape[lead + d])
            isp.append(e)
        return list(oc[:lead]) + isp, conds
    return coords, lead


def _norm_list(v, n, default=None):
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return list(default) if default is not None else None
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return v * n if len(v) == 1 else v


@register("aten.max_pool1d_with_indices", "aten.max_pool2d_with_indices", "aten.max_pool3d_with_indices",
          "aten.max_pool1d", "aten.max_pool2d", "aten.max_pool3d")
def _max_pool(ctx, node, x, kernel, stride=None, padding=0, dilation=1, ceil_mode=False):
    val = node.meta["val"]
    shape = tuple(val[0].shape if isinstance(val, (tuple, list)) else val.shape)
    nsp = len(_norm_list(kernel, 1))
    kernel = _norm_list(kernel, nsp)
    nsp = len(kernel)
    stride = _norm_list(stride, nsp, kernel)
    padding, dilation = _norm_list(padding, nsp), _norm_list(dilation, nsp)
    xb = ctx.realize(x, "pool_in")
    buf = xb.buffer
    coords, _ = _pool_windows(x, shape, kernel, stride, padding, dilation)
    from .index import flatten
    acc = _acc(x.dtype)

    def fn(oc, rc):
        full, conds = coords(oc, rc)
        ok = _cond_value(conds)
        v = vals.cast(vals.load(buf.name, flatten(full, x.shape), buf.dtype, tuple(conds)), acc)
        return call("where", ok, v, vals.const(-math.inf, acc)) if ok is not None else v
    red = ctx.reduce("max", shape, kernel, fn, acc, base="maxpool")
    out = red if x.dtype == acc else LTensor(shape, x.dtype, lambda c: vals.cast(red(c), x.dtype))
    if isinstance(val, (tuple, list)):
        def no_indices(c):
            raise NotImplementedError("max-pooling indices (return_indices=True)")
        return out, LTensor(shape, torch.int64, no_indices)
    return out


def _cond_value(conds):
    ok = None
    for cnd in conds:
        e = vals.index_value(cnd[1])
        if cnd[0] == "ge0":
            t = call("ge", e, vals.const(0, torch.int64))
        elif cnd[0] == "lt":
            t = call("lt", e, vals.const(cnd[2], torch.int64))
        else:
            t = call("eq", call("mod", e, vals.const(cnd[2], torch.int64)), vals.const(0, torch.int64))
        ok = t if ok is None else call("and", ok, t, dtype=torch.bool)
    return ok


@register("aten.avg_pool1d", "aten.avg_pool2d", "aten.avg_pool3d")
def _avg_pool(ctx, node, x, kernel, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
              divisor_override=None):
    shape = result_shape(node)
    kernel = _norm_list(kernel, 1)
    nsp = len(kernel)
    stride = _norm_list(stride, nsp, kernel)
    padding = _norm_list(padding, nsp)
    xb = ctx.realize(x, "pool_in")
    buf = xb.buffer
    coords, lead = _pool_windows(x, shape, kernel, stride, padding, [1] * nsp)
    from .index import flatten
    acc = _acc(x.dtype)

    def fn(oc, rc):
        full, conds = coords(oc, rc)
        return vals.cast(vals.load(buf.name, flatten(full, x.shape), buf.dtype, tuple(conds)), acc)
    total = ctx.reduce("sum", shape, kernel, fn, acc, base="avgpool")
    if divisor_override:
        return LTensor(shape, x.dtype, lambda c: vals.cast(call("div", total(c), vals.const(divisor_override, acc)),
                                                            x.dtype))

    def count(c):
        # window [start, end) clipped to the padded input (count_include_pad) or to the input itself
        cnt = None
        for d in range(nsp):
            start = add(c[lead + d] * stride[d], const(-padding[d]))
            end = add(start, const(kernel[d]))
            n = x.shape[lead + d]
            s_v, e_v = vals.index_value(start), vals.index_value(end)
            if count_include_pad:
                e_v = call("minimum", e_v, vals.const(n + padding[d], torch.int64))
            else:
                s_v = call("maximum", s_v, vals.const(0, torch.int64))
                e_v = call("minimum", e_v, vals.const(n, torch.int64))
            size = call("sub", e_v, s_v)
            cnt = size if cnt is None else call("mul", cnt, size)
        return vals.cast(cnt, acc)
    return LTensor(shape, x.dtype, lambda c: vals.cast(call("div", total(c), count(c)), x.dtype))


@register("aten.adaptive_max_pool1d", "aten.adaptive_max_pool2d", "aten.adaptive_max_pool3d")
def _adaptive_max(ctx, node, x, out_size):
    out = _adaptive(ctx, node, x, out_size, "max")

    def no_indices(c):
        raise NotImplementedError("adaptive max-pooling indices (return_indices=True)")
    return out, LTensor(out.shape, torch.int64, no_indices)


@register("aten._adaptive_avg_pool1d", "aten._adaptive_avg_pool2d", "aten._adaptive_avg_pool3d",
          "aten.adaptive_avg_pool1d")
def _adaptive_avg(ctx, node, x, out_size):
    return _adaptive(ctx, node, x, out_size, "sum")


def _adaptive(ctx, node, x, out_size, kind):
    val = node.meta["val"]
    shape = tuple(val[0].shape if isinstance(val, (tuple, list)) else val.shape)
    nsp = len(out_size)
    lead = len(x.shape) - nsp
    ins = x.shape[lead:]
    outs = shape[lead:]
    kmax = [max(-(-((o + 1) * i) // on) - (o * i) // on for o in range(on)) for i, on in zip(ins, outs)]
    xb = ctx.realize(x, "pool_in")
    buf = xb.buffer
    from .index import flatten
    acc = _acc(x.dtype)

    def window(c, d):
        i, on = ins[d], outs[d]
        start = floordiv(c[lead + d] * i, on)
        end = floordiv(add(c[lead + d] * i, const(i + on - 1)), on)
        return start, end

    def fn(oc, rc):
        full, conds = list(oc[:lead]), []
        for d in range(nsp):
            start, end = window(oc, d)
            e = add(start, rc[d])
            conds.append(("lt", add(e, end * -1), 0))  # e < end
            full.append(e)
        ok = None
        for cnd in conds:
            t = call("lt", vals.index_value(cnd[1]), vals.const(0, torch.int64))
            ok = t if ok is None else call("and", ok, t, dtype=torch.bool)
        v = vals.cast(vals.load(buf.name, flatten(full, x.shape), buf.dtype), acc)
        return call("where", ok, v, vals.const(0.0 if kind == "sum" else -math.inf, acc))
    total = ctx.reduce(kind, shape, kmax, fn, acc, base="adaptive")
    if kind == "max":
        return total if x.dtype == acc else LTensor(shape, x.dtype, lambda c: vals.cast(total(c), x.dtype))

    def f(c):
        cnt = None
        for d in range(nsp):
            start, end = window(c, d)
            size = vals.index_value(add(end, start * -1))
            cnt = size if cnt is None else call("mul", cnt, size)
        return vals.cast(call("div", total(c), vals.cast(cnt, acc)), x.dtype)
    return LTensor(shape, x.dtype, f)
