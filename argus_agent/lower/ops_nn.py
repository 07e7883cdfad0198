"""Matmul family, convolution (direct, transposed, grouped, strided, padded, dilated) and pooling.

Each is a reduction whose element reads index the operands: transposed operands are index maps, not copies;
padding and transposed-convolution holes are load conditions (the element reads 0, or -inf for max pooling).
"""

from __future__ import annotations

import math
import os

import torch

from . import values as vals
from .core import LTensor, buffer_tensor
from .index import Sum, Var, add, const, floordiv, mod
from .ops_depthwise import depthwise, depthwise_ok
from .registry import register, result_dtype, result_shape
from .templates import (
    SWAP,
    ConvTemplate,
    Fp32GemmTemplate,
    MatmulTemplate,
    conv_igemm_ok,
    fp32_gemm_ok,
    gemm_for,
    hopper_nk,
    hopper_plain,
)
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
    # a matrix-vector product (M or N == 1) is bandwidth-bound: a row (or column) reduction that reads each
    # matrix element once, never a GEMM template (whose tiles would be 1/64 to 1/128 used)
    vector = M == 1 or N == 1
    prec = getattr(ctx, "precision", None)
    if a.dtype == b.dtype == torch.float32 and prec is not None and prec.matmul == "bf16" and not vector:
        # --precision bf16: the operands rounded to bf16, products accumulated in f32: the bf16 tensor-core
        # GEMM where it takes the shapes, else the bf16 values through the fp32 path (exact products)
        from .precision import as_bf16, rounded_bf16
        if not batch and gemm_for(ctx.target, torch.bfloat16, M, N, K) is not None:
            a, b = as_bf16(ctx, a, "mm_a_bf16"), as_bf16(ctx, b, "mm_b_bf16")
        else:
            a, b = rounded_bf16(ctx, a, "mm_a_bf16"), rounded_bf16(ctx, b, "mm_b_bf16")
    if not vector and a.dtype == b.dtype == torch.float32 and fp32_gemm_ok(ctx.target, M, N, K, nbatch):
        return _fp32_gemm(ctx, a, b, batch, M, N, K, base)
    gemm = gemm_for(ctx.target, a.dtype, M, N, K) if not batch and not vector and a.dtype == b.dtype else None
    if gemm is not None:
        ab = ctx.contiguous(a, "mm_a")
        # b the transpose of an (N, K) buffer (F.linear's weight): read in place by the K-major kernel form
        # (no per-call transposing copy) where gemm_hopper's policy runs gemm_hopper itself (split-K too), and by
        # swap-AB
        sb = _strides(b)
        nk = ((gemm == SWAP or (gemm == "gemm_hopper" and hopper_nk(M, N, K))) and sb is not None
              and sb[2] == 0 and sb[1] == [1, K] and {x.name: x for x in ctx.buffers}[sb[0]].numel == N * K)
        bbuf = {x.name: x for x in ctx.buffers}[sb[0]] if nk else ctx.contiguous(b, "mm_b").buffer
        buf = ctx.add_buffer(base, (M, N), torch.float32)
        ctx.kernels.append(MatmulTemplate(buf, ab.buffer, bbuf, M, N, K, gemm, ctx.note,
                                          b_layout="nk" if nk else "kn"))
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
    bufs = {x.name: x for x in ctx.buffers}
    rows = M
    if bb == 1 and nbatch > 1:
        # one B for every batch and A contiguous (ensured above): one GEMM over the batch's rows stacked, not
        # nbatch GEMMs of M rows (a Linear on (L, N, E) gave 1024 GEMMs of 16 rows: level1/175 at 0.47x eager)
        M, nbatch, bb = nbatch * M, 1, 1
    prec = getattr(ctx, "precision", None)
    passes = 1 if prec is not None and prec.matmul == "tf32" else 3    # tf32: one TF32 product per k-tile
    swap = fp32_swap(nbatch, bb, M, N, K, layout, passes)
    if swap:
        ks, tile = dict(swap).get("KSPLIT", 1), ()
    else:
        ks, tile = fp32_tiling(nbatch, M, N, K)
        if bufs[sa[0]].kind in ("param", "buffer"):   # a model's tensor as A, read as it is: its base may be anywhere
            tile = tuple((k, v) for k, v in tile if k != "TMA_ONLY")
    if ks == 1:
        out = ctx.add_buffer(base, batch + (rows, N), torch.float32)
        ctx.kernels.append(Fp32GemmTemplate(out, bufs[sa[0]], bufs[sb[0]], nbatch, M, N, K, bb, layout, ctx.note,
                                            passes=passes, tile=tile, swap=swap))
        return buffer_tensor(out)
    # split-K: KS partial products per output tile (enough blocks to fill the GPU), then their sum
    part = ctx.add_buffer(base + "_part", (nbatch, ks, M, N), torch.float32)
    ctx.kernels.append(Fp32GemmTemplate(part, bufs[sa[0]], bufs[sb[0]], nbatch, M, N, K, bb, layout, ctx.note,
                                        ksplit=ks, passes=passes, swap=swap))
    pt = buffer_tensor(part)
    red = ctx.reduce("sum", (nbatch, M, N), (ks,), lambda oc, rc: pt([oc[0], rc[0], oc[1], oc[2]]), torch.float32,
                     base=base)
    if not batch:
        return LTensor((M, N), torch.float32, lambda c: red([const(0)] + list(c)))
    from .index import flatten
    if nbatch == 1:     # the batch's rows stacked into M
        return LTensor(batch + (rows, N), torch.float32,
                       lambda c: red([const(0), flatten(c[:-1], batch + (rows,)), c[-1]]))
    return LTensor(batch + (M, N), torch.float32, lambda c: red([flatten(c[:-2], batch)] + list(c[-2:])))


def fp32_tiling(nbatch: int, M: int, N: int, K: int, sms: int | None = None) -> tuple[int, tuple]:
    """(shares of K each output tile is split into, the narrower tile's constexprs as (name, value) pairs) of the
    fp32 GEMM: stdlib gemm_fp32's `launch_policy`, what its own launch runs (split-K where 128 x 128 tiles leave
    SMs idle and K is long; unsplit 128 x 64 / 64 x 64 tiles where K is short; 128 x 96 tiles where their waves
    are fuller), so a lowered fp32 matmul runs the form measured for its shape; the split where the narrower
    tiles lost inside the lowered program (LOWERED_BN64_MIN_K)."""
    from stdlib_kernels import gemm_fp32

    pol = dict(gemm_fp32.launch_policy(M, N, K, nbatch, sms))
    if "KSPLIT" not in pol and pol and (not gemm_fp32.raw_ok(K) or (
            pol.get("BN") == 64 and "BM" not in pol and K < LOWERED_BN64_MIN_K)):
        pol = gemm_fp32.policy(M, N, K, nbatch, sms)
    ks = pol.pop("KSPLIT", 1)
    return ks, tuple(sorted(pol.items()))


def fp32_swap(nbatch: int, bb: int, M: int, N: int, K: int, layout: str, passes: int) -> tuple:
    """gemm_fp32's swap-AB constexprs ((name, value) pairs) where its own `launch` swaps: one product of at most
    SWAP_ROWS rows whose B TMA can read as it is ("nk": K % 4 == 0, "kn": N % 4 == 0), fp32-accurate (three passes);
    () elsewhere. The weight is then read once as it is, split in registers, where the unswapped form reads its
    TF32 halves (twice its bytes; split by a pass on every call where B is not a weight)."""
    from stdlib_kernels import gemm_fp32

    if nbatch != 1 or bb != 1 or M > gemm_fp32.SWAP_ROWS or passes != 3 or (K % 4 if layout == "nk" else N % 4):
        return ()
    return tuple(sorted(gemm_fp32.swap_params(M, N, K, b_layout=layout).items()))


# The lowered program (B split by a pass each call unless a weight, the split-K sum its own kernel) against the same
# program on `policy`'s tiles, H100, rotated, two rounds, x SGEMM (benchmarks/lowered_fp32.py; NOTES "Lowered fp32
# matmuls"): launch_policy's tiles win where A is read as it is (1024^3 1.73-1.77 -> 1.96-1.98, 2051 x 2045 x 1000
# 1.67 -> 1.92-1.93, 1536^3 1.64-1.66 -> 1.92-1.99, 512^3 0.75-0.76 -> 0.98-0.99) but lose where A is split first
# (1000 x 1000 x 1002, 128 x 64: 1.20 -> 1.09) and where 128 x 64 tiles replace a split of fewer than 32 k-tiles
# (768^3: 1.52-1.53 -> 1.46-1.47): there the lowering keeps the split.
LOWERED_BN64_MIN_K = 1024


def _contig(shape):
    from .index import contiguous_strides
    return list(contiguous_strides(shape))


def _stored_like_eager(ctx, r: LTensor, res: LTensor) -> LTensor:
    """A bf16 matmul's result (its f32 product plus bias, rounded: eager stores that) as a buffer of its own
    where the product is a gemm_hopper template that can store it: the Pointwise kernel computing it becomes
    the GEMM's epilogue (templates.fuse_epilogues), so the GEMM writes bf16 once and nothing re-reads f32."""
    t = ctx.kernels[-1] if ctx.kernels else None
    if (res.dtype == torch.bfloat16 and isinstance(t, MatmulTemplate) and r.buffer is t.out
            and t.kernel == "gemm_hopper" and hopper_plain(t.M, t.N, t.K, torch.bfloat16) and t.M * t.N < 2**31):
        return ctx.realize(res, "linear")
    return res


@register("aten.mm", "aten.bmm", "aten.matmul")
def _mm(ctx, node, a, b):
    out = result_dtype(node)
    r = matmul(ctx, a, b, out)
    return r if r.dtype == out else _stored_like_eager(ctx, r, LTensor(r.shape, out,
                                                                          lambda c: vals.cast(r(c), out)))


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
    return _stored_like_eager(ctx, r, LTensor(shape, out, f))


@register("aten.addbmm")
def _addbmm(ctx, node, bias, a, b, beta=1, alpha=1):
    """beta * bias + alpha * sum_i a[i] @ b[i]: one (n, B m) @ (B m, p) product, the batch folded into K."""
    B, n, m = a.shape
    p = b.shape[2]
    a2 = LTensor((n, B * m), a.dtype, lambda c: a([floordiv(c[1], m), c[0], mod(c[1], m)]))
    b2 = LTensor((B * m, p), b.dtype, lambda c: b([floordiv(c[0], m), mod(c[0], m), c[1]]))
    return _addmm(ctx, node, bias, a2, b2, beta, alpha)


def _in_range(e, n):
    return [("ge0", e), ("lt", e, n)]


@register("aten.convolution")
def _convolution(ctx, node, x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    shape = result_shape(node)
    out = result_dtype(node)
    acc = _acc(out)
    nsp = len(x.shape) - 2
    stride, padding, dilation = (list(v) * (nsp if len(v) == 1 else 1) for v in (stride, padding, dilation))
    N, Ci = x.shape[:2]
    Co = shape[1]
    ksz = list(w.shape[2:])
    cig = Ci // groups
    cog = Co // groups
    if not transposed and _subsampled_ok(ctx, x, w, shape, stride, padding, groups):
        x, stride = _subsampled(x, shape, stride), [1] * nsp
    merge = _merged_groups(ctx, x, w, transposed, stride, dilation, groups) if not transposed else 1
    if merge > 1:
        w, groups = _merged_weight(ctx, w, groups, merge), groups // merge
        cig, cog = Ci // groups, Co // groups
    isz = list(x.shape[2:])
    fused = (not transposed and _fused_copy_ok(ctx, x, w, stride, dilation, groups)
             and conv_igemm_ok(ctx.target, x.dtype, N * math.prod(shape[2:]), cig, cog, math.prod(ksz), groups,
                               x.numel, math.prod(shape)))
    xb, wb = (x if fused else ctx.realize(x, "conv_in")), ctx.realize(w, "conv_w")
    xbuf, wbuf = xb.buffer, wb.buffer
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
    npix = N * math.prod(osz)
    phased = None
    if (TRANSPOSED_PHASES and transposed and x.dtype == w.dtype and any(s > 1 for s in stride)
            and all(d == 1 for d in dilation)):
        phased = _transposed_phases(ctx, xb, wb, shape, stride, padding, groups)
    if phased is not None:
        red = phased
    elif x.dtype == w.dtype and conv_igemm_ok(ctx.target, x.dtype, npix, cig, cog, math.prod(ksz), groups,
                                              x.numel, math.prod(shape)):
        red = _conv_igemm(ctx, xb, wb, shape, stride, padding, dilation, transposed, groups, fused=fused)
    elif depthwise_ok(ctx.target, x, w, transposed, groups, stride, dilation, DEPTHWISE_MIN_TAPS):
        red = depthwise(ctx, xb, wb, shape, stride, padding, dilation)
    elif cig * math.prod(ksz) <= DIRECT_TAPS or (cig == 1 and math.prod(ksz) <= DEPTHWISE_TAPS):
        red = _direct_sum(shape, acc, [cig] + ksz, fn)
    else:
        red = ctx.reduce("sum", shape, [cig] + ksz, fn, acc, base="conv")
    if bias is None:
        return red if out == acc else LTensor(shape, out, lambda c: vals.cast(red(c), out))
    return LTensor(shape, out, lambda c: vals.cast(call("add", red(c), vals.cast(bias([c[1]]), acc)), out))


# A convolution with at most this many products per output (depthwise 3x3 / 3x3x3, tiny channel counts) that
# the implicit GEMM does not take is a pointwise sum of its taps written out (masked loads where padding or a
# stride hole is), not a reduction: its output stays an expression, so the pointwise chain after it (bias,
# norm, activation) and the copy into the next convolution's input run in the same kernel, and no reduction
# tile is left two-thirds empty (9 taps in a 16-wide tile).
DIRECT_TAPS = 27
# A depthwise convolution (one input channel per output) is a stencil. On a GPU target a large window runs the
# stdlib depthwise kernel (ops_depthwise); elsewhere (the CPU target, fp16/bf16, unequal strides) up to this
# many taps (7x7 as ConvNeXt's, 9x9) it is written out too: as a reduction its 49-tap window took 887 us on the
# H100 for ConvNeXt's 16 x 96 x 56 x 56 block, written out 401 us, the stdlib kernel (see ops_depthwise).
DEPTHWISE_TAPS = 81
# From this many taps on a GPU target's fp32 depthwise convolution runs the stdlib kernel (below: written out).
# 3x3 and 5x5 too: on the H100 (2026-11-24, benchmarks/results/suite-depthwise-min{28,9}-*.json, x eager) with the
# kernel from 9 taps against from 28: MobileNetV2 blocks 1.05 -> 1.41, EfficientNet MBConv+SE 0.64 -> 1.10,
# level1/094 (3x3 alone) 0.83 -> 1.31, ShuffleNet unit 0.95 -> 1.03; the written-out taps recompute each tap's
# mask and gather the channel's weight per element, and were stored anyway where two kernels read them.
DEPTHWISE_MIN_TAPS = int(os.environ.get("ARGUS_DEPTHWISE_MIN_TAPS", 9))


def _taps(window) -> list:
    """Every tap of a window, in order, as constant index coordinates."""
    import itertools

    return [[const(v) for v in rc] for rc in itertools.product(*[range(n) for n in window])]


def _direct_sum(shape, acc, red_shape, fn, op: str = "add"):
    taps = _taps(red_shape)

    def value(oc):
        v = None
        for rc in taps:
            t = fn(oc, rc)
            v = t if v is None else call(op, v, t)
        return v
    return LTensor(tuple(shape), acc, value)


POOL_TAPS = 32   # a pooling window of at most this many taps is written out (a pointwise kernel), not reduced


def _pool_reduce(ctx, kind, shape, window, fn, acc, base):
    """A pooling window's fold: written out tap by tap (one pointwise kernel, each tap a masked load at the
    output's own index plus a constant, fused with what follows) when the window is small, else a Reduction.
    The reduction tile of a 3x3 / 3x3x3 window is a third to two-thirds padding, and its per-element index
    and mask arithmetic is what the pool's time went to (level 1 pools at 0.25-0.55x eager)."""
    if math.prod(window) <= POOL_TAPS:
        return _direct_sum(shape, acc, window, fn, {"sum": "add", "max": "maximum"}[kind])
    return ctx.reduce(kind, shape, window, fn, acc, base=base)


def _conv_igemm(ctx, x, w, shape, stride, padding, dilation, transposed, groups, tma=True, wphase=None,
                fused=False):
    """The convolution as an implicit GEMM on the tensor cores (stdlib conv_igemm): the input read in place
    (no im2col buffer), the weight as B (G, Cout/G, Cin/G * kernel): in place for a direct convolution, a
    permuted copy for a transposed one. One TF32 pass where PyTorch's cuDNN takes TF32 for fp32 convolutions
    (`torch.backends.cudnn.allow_tf32`, on by default), else 3xTF32 at fp32 accuracy. `wphase`: conv_tma's B
    is phase p of a weight buffer built for every phase of a transposed convolution (`_phases_weight_tma`)."""
    from stdlib_kernels import conv_igemm, conv_tma

    from .index import unflatten
    conv_prec = _conv_precision(ctx)
    if conv_prec == "bf16":     # operands rounded to bf16 (exact in TF32), one TF32 pass: f32 accumulation
        from .precision import rounded_bf16
        x, w = rounded_bf16(ctx, x, "conv_in_bf16"), rounded_bf16(ctx, w, "conv_w_bf16")
    xb = x if fused else ctx.contiguous(x, "conv_in")     # fused: computed in conv_tma's channels-last copy
    cig, cog = x.shape[1] // groups, shape[1] // groups
    ksz = list(w.shape[2:])
    K = cig * math.prod(ksz)
    if (tma and CONV_TMA and conv_tma.applies(x.shape, w.shape, stride, dilation, groups, transposed)
            and (CONV_TMA_WSTRIDE or stride[-1] == 1)):
        return _conv_tma(ctx, xb, w, shape, stride, padding, dilation, groups, conv_prec == "fp32",
                         copy=tma if isinstance(tma, tuple) else None, wphase=wphase, fused=fused)
    if fused:
        raise AssertionError("a convolution whose input was left to conv_tma's copy did not take conv_tma")
    geo = conv_igemm.geometry(x.shape, w.shape, shape, stride, padding, dilation, groups, transposed)
    if not transposed:
        wb = ctx.contiguous(w, "conv_w")
    elif geo["PHASED"]:     # strided: one direct GEMM per output phase in one launch (conv_igemm PHASED)
        wb = _phased_weight(ctx, w, geo, groups, cig, cog)
        K = wb.shape[2]
    else:
        def wval(c):    # B[g, co, (ci, *k)] = w[g * cig + ci, co, *k]
            rc = unflatten(c[2], [cig] + ksz)
            return w([add(rc[0], c[0] * cig), c[1]] + rc[1:])
        wb = ctx.contiguous(LTensor((groups, cog, K), w.dtype, lambda c: wval(c)), "conv_wt")
    out = ctx.add_buffer("conv", shape, torch.float32)
    split = conv_prec == "fp32"     # 3xTF32 at fp32 accuracy; tf32 and bf16: one TF32 pass
    ctx.kernels.append(ConvTemplate(out, xb.buffer, wb.buffer, groups, cog, K, geo, split, ctx.note))
    return buffer_tensor(out)


# Direct convolutions with at least 16 input channels per group (a multiple of 32 when grouped) run stdlib
# conv_tma: the input copied once per call channels-last and zero-padded (to_ndhwc; a stride along W stores each
# row's stride phases apart), every A tile one bulk tensor copy of it, no gather (1x1 convolutions included: a
# batched GEMM on the transposed input).
# The phases of a strided transposed convolution (direct unit-stride convolutions of one input, each with its
# own padding) share one copy, padded by the largest phase padding; each reads it at an offset.
# ARGUS_CONV_TMA=0 keeps them on conv_igemm. ARGUS_CONV_TMA_WSTRIDE=0 keeps convolutions with a stride along W
# (the phased copy) on conv_igemm, ARGUS_CONV_TMA_PHASES=0 the transposed phases; both on since timed on the H100
# (suite --runs 10, speedup over eager off -> on: level1/091 0.58 -> 0.87x, 097 0.50 -> 0.81x, 098 0.80 -> 0.83x,
# level2/003 0.69 -> 0.78x, 010 0.69 -> 0.97x; 099 and 101 within 2%; level2/034 0.78 -> 0.66x: its 3-D phases
# are small, and each phase's weight preparation was three kernels of its own, 36 launches in all; since then
# one weight buffer serves every phase, 14 launches: not yet timed).
CONV_TMA = os.environ.get("ARGUS_CONV_TMA", "1") == "1"
CONV_TMA_WSTRIDE = os.environ.get("ARGUS_CONV_TMA_WSTRIDE", "1") == "1"
CONV_TMA_PHASES = os.environ.get("ARGUS_CONV_TMA_PHASES", "1") == "1"


def _conv_precision(ctx) -> str:
    """fp32 / tf32 / bf16: what fp32 convolutions run at (the asked precision, else cuDNN's TF32 flag)."""
    prec = getattr(ctx, "precision", None)
    return prec.conv if prec is not None else ("tf32" if torch.backends.cudnn.allow_tf32 else "fp32")


CONV_FUSED_COPY = os.environ.get("ARGUS_CONV_FUSED_COPY", "1") == "1"
FUSED_COPY_READS = 2


# A strided 1x1 convolution without padding (ResNet's and ResNeXt's projection shortcuts) is the 1x1 convolution
# of its input's every S-th pixel: the subsampled input is an expression computed in conv_tma's channels-last
# copy (render_conv_copy.py), 1 / S^2 of the input, and the GEMM is a plain batched one over every output pixel
# of an image (128-pixel tiles). As a strided convolution it took the phased copy of the whole input and one
# output row a tile: level3/020's 16 x 256 x 56 x 56 -> 512 x 28 x 28 shortcut in 64-pixel tiles of 28-pixel
# rows, the copy 44 us. ARGUS_CONV_SUBSAMPLE=0 keeps it a strided convolution.
CONV_SUBSAMPLE = os.environ.get("ARGUS_CONV_SUBSAMPLE", "1") == "1"


def _subsampled_ok(ctx, x, w, shape, stride, padding, groups) -> bool:
    """Whether a strided 1x1 convolution runs as the 1x1 convolution of its subsampled input on conv_tma."""
    nsp = len(x.shape) - 2
    if not (CONV_SUBSAMPLE and all(k == 1 for k in w.shape[2:]) and not any(padding)
            and any(s > 1 for s in stride)):
        return False
    xs = _subsampled(x, shape, stride)
    cig, cog = x.shape[1] // groups, shape[1] // groups
    return (_fused_copy_ok(ctx, xs, w, [1] * nsp, [1] * nsp, groups)
            and conv_igemm_ok(ctx.target, x.dtype, shape[0] * math.prod(shape[2:]), cig, cog, 1, groups,
                              xs.numel, math.prod(shape)))


def _subsampled(x, shape, stride) -> LTensor:
    """x's pixels at every stride-th coordinate: (N, C, *the output's spatial sizes)."""
    nsp = len(x.shape) - 2
    return LTensor(tuple(x.shape[:2]) + tuple(shape[2:]), x.dtype,
                   lambda c: x([c[0], c[1]] + [c[2 + d] * stride[d] for d in range(nsp)]))


# A grouped convolution with narrow groups (ResNeXt's 32 groups of 8 channels) takes conv_igemm's element-wise
# gathers and N tiles of Cout/G (8 of a 32-wide wgmma); conv_tma needs Cin/G a multiple of 32. Merged, m = 32 /
# (Cin/G) neighbouring groups are one group of 32 input channels whose weight is block-diagonal (zeros between
# the merged groups): the same convolution at m times the products, on conv_tma's bulk copies.
# ARGUS_CONV_MERGE_GROUPS=1 turns it on (not yet timed: off).
CONV_MERGE_GROUPS = os.environ.get("ARGUS_CONV_MERGE_GROUPS", "0") == "1"
MERGED_CIG = 32


def _merged_groups(ctx, x, w, transposed, stride, dilation, groups) -> int:
    """How many neighbouring groups a grouped convolution merges into one (1: none): Cin/G of at least 4
    dividing MERGED_CIG, the merged convolution taken by conv_tma on an fp32 GPU target."""
    from stdlib_kernels import conv_tma

    cig = x.shape[1] // groups
    if not (CONV_MERGE_GROUPS and CONV_TMA and ctx.target == "sm_90a" and groups > 1 and not transposed
            and x.dtype == w.dtype == torch.float32 and 4 <= cig < MERGED_CIG and MERGED_CIG % cig == 0
            and groups % (MERGED_CIG // cig) == 0 and _conv_precision(ctx) != "bf16"
            and (CONV_TMA_WSTRIDE or stride[-1] == 1)):
        return 1
    m = MERGED_CIG // cig
    ws = (w.shape[0], MERGED_CIG) + tuple(w.shape[2:])
    return m if conv_tma.applies(x.shape, ws, stride, dilation, groups // m, False) else 1


def _merged_weight(ctx, w, groups: int, m: int) -> LTensor:
    """The weight of the convolution with m neighbouring groups merged: (Cout, m Cin/G, *k), output channel
    co's own Cin/G channels at (co // (Cout/G)) % m times Cin/G, zeros elsewhere."""
    from .index import flatten

    wb = ctx.realize(w, "conv_w").buffer
    co_n, cig = w.shape[:2]
    cog, ks = co_n // groups, list(w.shape[2:])

    def value(c):
        e = add(c[1], mod(floordiv(c[0], cog), m) * (-cig))      # the channel within co's own group
        return vals.load(wb.name, flatten([c[0], e] + list(c[2:]), w.shape), wb.dtype, (("ge0", e), ("lt", e, cig)))
    return LTensor((co_n, cig * m) + tuple(ks), w.dtype, value)


def _fused_copy_ok(ctx, x, w, stride, dilation, groups) -> bool:
    """Whether a direct convolution's input, an expression rather than a buffer (padding modes as torch
    decomposes them, an activation, a permute), is computed in conv_tma's channels-last copy instead of being
    realized first (render_conv_copy.py): fp32 on conv_tma with the plain copy (unit W stride), not bf16
    operands, and at most FUSED_COPY_READS reads of a large buffer per element (a padding's selects read one
    place; a depthwise convolution's written-out taps read nine: such an expression in the copy's (channel,
    pixel) tiles took level2/029 from 0.76x to 0.60x eager on the H100). ARGUS_CONV_FUSED_COPY=0 realizes it as
    before."""
    from stdlib_kernels import conv_tma

    from .render_conv_copy import reads_per_element

    if not (CONV_FUSED_COPY and CONV_TMA and ctx.target == "sm_90a" and x.dtype == w.dtype == torch.float32
            and x.buffer is None and ctx.whole_buffer(x) is None and stride[-1] == 1
            and _conv_precision(ctx) != "bf16" and x.numel < 2**31
            and conv_tma.applies(x.shape, w.shape, stride, dilation, groups, False)):
        return False
    value = x([Var(f"_x{k}", n) for k, n in enumerate(x.shape)])
    return reads_per_element(value, {b.name: b.numel for b in ctx.buffers}) <= FUSED_COPY_READS


def _conv_tma(ctx, xb, w, shape, stride, padding, dilation, groups, split, copy=None, wphase=None, fused=False):
    """The convolution on conv_tma: B (G, Cout/G, taps * CIGP) from the weight (a small reordering copy, zeros
    at the channels padded to BK), the template's host lines copy x channels-last before the GEMM (`copy`: the
    (left padding, padded sizes) of a copy shared with other convolutions of x). `wphase` = (buffer, p, K): B is
    phase p of a (phases, G, Cout/G, K) buffer made once for every phase (w is then read for its shape only)."""
    from stdlib_kernels import conv_tma

    from .index import flatten, mod, unflatten
    geo = conv_tma.geometry(xb.shape, w.shape, shape, stride, padding, dilation, groups, copy)
    cig, cog = xb.shape[1] // groups, shape[1] // groups
    if wphase is not None:
        wall, p, K = wphase
        out = ctx.add_buffer("conv", shape, torch.float32)
        ctx.kernels.append(ConvTemplate(out, xb.buffer, wall, groups, cog, K, geo, split, ctx.note,
                                        kernel="conv_tma", w_phase=p))
        return buffer_tensor(out)
    ksz = list(w.shape[2:])
    cigp = geo["CIGP"]
    wbuf = ctx.contiguous(w, "conv_w").buffer

    def wval(c):    # B[g, co, t * CIGP + ci] = w[g * cog + co, ci, *tap t], 0 for ci >= cig
        ci, t = mod(c[2], cigp), floordiv(c[2], cigp)
        conds = (("lt", ci, cig),) if cigp > cig else ()
        idx = flatten([add(c[1], c[0] * cog), ci] + unflatten(t, ksz), w.shape)
        return vals.load(wbuf.name, idx, wbuf.dtype, conds)
    K = math.prod(ksz) * cigp
    wb = ctx.contiguous(LTensor((groups, cog, K), w.dtype, wval), "conv_wtma")
    out = ctx.add_buffer("conv", shape, torch.float32)
    if fused:       # x is an expression: the channels-last copy computes it (render_conv_copy.py)
        from .render_conv_copy import NdhwcCopy, copy_reads, placeholder

        known = {b.name: b for b in ctx.buffers}
        ctx.kernels.append(ConvTemplate(out, placeholder(ctx, xb), wb.buffer, groups, cog, K, geo, split, ctx.note,
                                        kernel="conv_tma", xcopy=NdhwcCopy(xb, geo),
                                        xreads=copy_reads(xb, geo, known)))
        return buffer_tensor(out)
    ctx.kernels.append(ConvTemplate(out, xb.buffer, wb.buffer, groups, cog, K, geo, split, ctx.note,
                                    kernel="conv_tma"))
    return buffer_tensor(out)


def _phased_weight(ctx, w, geo, groups, cig, cog):
    """B of a PHASED transposed convolution (stdlib conv_igemm.weight_phased, on the device): row ph * G + g,
    column t * CIG + ci holds w[g * CIG + ci, co, k0 + S t] for tap t of the largest phase's tap grid, 0 where
    phase ph has no tap t."""
    import itertools

    from stdlib_kernels import conv_igemm

    from .index import flatten, mod, scale
    wbuf = ctx.contiguous(w, "conv_w").buffer
    nsp = len(w.shape) - 2
    tmax = [-(-k // s) for k, s in zip(geo["KS"], geo["ST"])]
    kph = cig * math.prod(tmax)
    plans = []
    for ph, a in enumerate(itertools.product(*[range(s) for s in geo["ST"]])):
        taps = conv_igemm.phase_taps(geo, a)
        if all(t > 0 for _, t in taps):
            plans.append((ph, taps))

    def fn(c):
        z, co, k = c
        v = None
        ci, tt = mod(k, cig), floordiv(k, cig)
        ts = [floordiv(tt, tmax[1] * tmax[2]), mod(floordiv(tt, tmax[2]), tmax[1]), mod(tt, tmax[2])]
        for ph, taps in plans:
            g = add(z, const(-ph * groups))
            kk = [add(const(k0), scale(t, s)) for (k0, _), t, s in zip(taps, ts, geo["ST"])][3 - nsp:]
            conds = (("ge0", g), ("lt", g, groups)) + tuple(("lt", t, n) for (_, n), t in zip(taps, ts))
            ld = vals.load(wbuf.name, flatten([add(ci, g * cig), co] + kk, w.shape), wbuf.dtype, conds)
            v = ld if v is None else call("add", v, ld)
        return v if v is not None else vals.const(0.0, w.dtype)
    shape = (conv_igemm.phases(geo) * groups, cog, kph)
    return ctx.contiguous(LTensor(shape, w.dtype, fn), "conv_wphase")


# A strided transposed convolution as stride^d direct ones, each into its own buffer, then one gather of the
# output from them: the IR form of the phases that conv_igemm's PHASED kernel now runs in one launch (with
# the fused epilogue). Off by default; ARGUS_TRANSPOSED_PHASES=1 gives it back.
TRANSPOSED_PHASES = os.environ.get("ARGUS_TRANSPOSED_PHASES", "1") == "1"


def _transposed_phases(ctx, x, w, shape, stride, padding, groups):
    """The transposed convolution (dilation 1) as one direct implicit GEMM per output phase a (o = a + s j):
    tap k meets input (o + P - k) / s when k = k0 + s t, k0 = (a + P) % s, that is input j + c - t with
    c = (a + P - k0) / s; flipped (t' = T - 1 - t) it is a direct convolution of stride 1, padding T - 1 - c,
    over the sub-kernel w[..., k0 + s (T - 1 - t')]. The result reads each output element from its phase's
    buffer (masked loads: the other phases read 0). None when a phase does not take the implicit GEMM."""
    import itertools

    from .index import flatten
    nsp = len(shape) - 2
    N, Co = shape[0], shape[1]
    cig, cog = x.shape[1] // groups, Co // groups
    osz, ksz = list(shape[2:]), list(w.shape[2:])
    plans = []
    for a in itertools.product(*[range(s) for s in stride]):
        dims = []
        for d in range(nsp):
            s, P = stride[d], padding[d]
            k0 = (a[d] + P) % s
            T = len(range(k0, ksz[d], s))
            J = len(range(a[d], osz[d], s))
            dims.append((k0, T, J, (a[d] + P - k0) // s))
        if any(J == 0 for _, _, J, _ in dims):
            continue                        # no output position of this phase
        if any(T == 0 for _, T, _, _ in dims):
            plans.append((a, dims, None))   # no tap reaches it: zeros (plus the bias)
            continue
        tv = math.prod(T for _, T, _, _ in dims)
        npix = N * math.prod(J for _, _, J, _ in dims)
        if not conv_igemm_ok(ctx.target, x.dtype, npix, cig, cog, tv, groups, x.numel, Co * npix):
            return None
        plans.append((a, dims, True))
    # one channels-last copy of x for every phase on conv_tma: padded left by the largest phase padding, right
    # as far as any phase's last tap reaches
    live = [dims for _, dims, ok in plans if ok is not None]
    copy = False
    if live and CONV_TMA and CONV_TMA_PHASES:
        from stdlib_kernels import conv_tma

        isz = list(x.shape[2:])
        pl = [max(0, max(dims[d][1] - 1 - dims[d][3] for dims in live)) for d in range(nsp)]
        ext = [max([isz[d] + pl[d]] + [dims[d][2] + dims[d][1] - 1 + pl[d] - (dims[d][1] - 1 - dims[d][3])
                                       for dims in live]) for d in range(nsp)]
        if all(conv_tma.applies(x.shape, (Co, cig) + tuple(T for _, T, _, _ in dims), [1] * nsp, [1] * nsp,
                                groups, False) for dims in live):
            copy = (tuple([0] * (3 - nsp) + pl), tuple([1] * (3 - nsp) + ext))
    # conv_tma's B of every phase in one buffer (one kernel, one TF32 split), where no bf16 rounding comes first
    wall = _phases_weight_tma(ctx, w, live, stride, groups, cig, cog) if copy and _conv_precision(ctx) != "bf16" \
        else None
    parts = []
    for a, dims, ok in plans:
        if ok is None:
            continue
        tshape = (Co, cig) + tuple(T for _, T, _, _ in dims)

        def wsub(c, dims=dims):    # direct weight [g * cog + co, ci, t'] = w[g * cig + ci, co, k0 + s (T-1-t')]
            co, ci, ts = c[0], c[1], c[2:]
            grp = floordiv(co, cog)
            kc = [add(const(k0 + stride[d] * (T - 1)), ts[d] * (-stride[d])) for d, (k0, T, _, _) in enumerate(dims)]
            return w([add(ci, grp * cig), add(co, grp * (-cog))] + kc)
        pshape = (N, Co) + tuple(J for _, _, J, _ in dims)
        pads = [T - 1 - c for _, T, _, c in dims]
        # conv_tma on the shared copy where it applies, else conv_igemm (never a copy per phase)
        if wall is not None:    # B from the buffer of every phase: the sub-kernel is read for its shape only
            wph = (wall[0], len(parts), wall[1])
            parts.append((a, _conv_igemm(ctx, x, LTensor(tshape, w.dtype, wsub), pshape, [1] * nsp, pads,
                                         [1] * nsp, False, groups, tma=copy, wphase=wph)))
            continue
        wb = ctx.contiguous(LTensor(tshape, w.dtype, wsub), "conv_wphase")
        parts.append((a, _conv_igemm(ctx, x, wb, pshape, [1] * nsp, pads, [1] * nsp, False, groups, tma=copy)))

    def fn(c):
        v = None
        for a, part in parts:
            js = [floordiv(c[2 + d], stride[d]) for d in range(nsp)]
            conds = tuple(("div", add(c[2 + d], const(-a[d])), stride[d]) for d in range(nsp) if stride[d] > 1)
            ld = vals.load(part.buffer.name, flatten([c[0], c[1]] + js, part.shape), torch.float32, conds)
            v = ld if v is None else call("add", v, ld)
        return v if v is not None else vals.const(0.0, torch.float32)
    return LTensor(tuple(shape), torch.float32, fn)


def _phases_weight_tma(ctx, w, live, stride, groups, cig, cog):
    """conv_tma's B of every phase of a transposed convolution in one buffer (phases, G, Cout/G, K): phase p's
    B[g, co, t * CIGP + ci] = w[g * cig + ci, co, k0 + s (T - 1 - t')] for tap t (t' its coordinates in the
    phase's tap grid), zeros past the phase's taps (K is the largest phase's) and at the channels padded to
    CIGP. One kernel and one TF32 split for all phases, where each phase had a sub-kernel copy, a reordering
    and a split of its own. Returns (buffer, K)."""
    from stdlib_kernels import conv_tma

    from .index import flatten, mod, unflatten
    wbuf = ctx.contiguous(w, "conv_w").buffer
    taps = [[T for _, T, _, _ in dims] for dims in live]
    cigp = conv_tma.geometry((1, cig * groups, 1), (cog * groups, cig, 1), None, 1, 0, 1, groups)["CIGP"]
    K = max(math.prod(t) for t in taps) * cigp

    def fn(c):
        p, g, co, k = c
        ci, t = mod(k, cigp), floordiv(k, cigp)
        v = None
        for i, dims in enumerate(live):
            ts = unflatten(t, taps[i])
            kc = [add(const(k0 + stride[d] * (T - 1)), ts[d] * (-stride[d])) for d, (k0, T, _, _) in enumerate(dims)]
            pi = add(p, const(-i))
            conds = (("ge0", pi), ("lt", pi, 1), ("lt", t, math.prod(taps[i])))
            conds += (("lt", ci, cig),) if cigp > cig else ()
            ld = vals.load(wbuf.name, flatten([add(ci, g * cig), co] + kc, w.shape), wbuf.dtype, conds)
            v = ld if v is None else call("add", v, ld)
        return v
    return ctx.contiguous(LTensor((len(live), groups, cog, K), w.dtype, fn), "conv_wtma").buffer, K


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
    xb = ctx.contiguous(x, "pool_in")
    buf = xb.buffer
    coords, _ = _pool_windows(x, shape, kernel, stride, padding, dilation)
    from .index import flatten
    acc = _acc(x.dtype)

    def fn(oc, rc):
        full, conds = coords(oc, rc)
        ok = _cond_value(conds)
        v = vals.cast(vals.load(buf.name, flatten(full, x.shape), buf.dtype, tuple(conds)), acc)
        return call("where", ok, v, vals.const(-math.inf, acc)) if ok is not None else v
    red = _pool_reduce(ctx, "max", shape, kernel, fn, acc, "maxpool")
    out = red if x.dtype == acc else LTensor(shape, x.dtype, lambda c: vals.cast(red(c), x.dtype))
    if isinstance(val, (tuple, list)):      # (an indices kernel nothing reads is dropped with the dead ones)
        return out, _max_pool_indices(ctx, x, shape, kernel, coords, fn, red)
    return out


def _max_pool_indices(ctx, x, shape, kernel, coords, value, best):
    """return_indices=True: per output, the flat index (over the input's pooled dims, as torch) of the first
    window element (in window order) equal to the window's max `best`, a NaN for a NaN max."""
    from .index import flatten

    nsp = len(kernel)
    lead = len(x.shape) - nsp
    n = math.prod(x.shape[lead:])

    def fn(oc, rc):
        full, conds = coords(oc, rc)
        v, b = value(oc, rc), best(oc)
        hit = call("or", call("eq", v, b), call("and", call("ne", b, b), call("ne", v, v), dtype=torch.bool),
                   dtype=torch.bool)
        ok = _cond_value(conds)
        if ok is not None:          # a padding position is never the answer (an all -inf window: its first element)
            hit = call("and", ok, hit, dtype=torch.bool)
        at = vals.index_value(flatten(full[lead:], x.shape[lead:]))
        return call("where", hit, at, vals.const(n, torch.int64), dtype=torch.int64)
    if math.prod(kernel) <= POOL_TAPS:
        return _first_max_index(shape, kernel, coords, value, lead, x.shape[lead:], n)
    return ctx.reduce("min", shape, kernel, fn, torch.int64, base="maxpool_idx")


def _first_max_index(shape, kernel, coords, value, lead, pooled, n):
    """A small window's argmax written out tap by tap (one pointwise kernel, no reduction tile): a running
    (best, index) pair that a tap replaces when it is in range and the first such, larger, or a NaN over a
    number (the first NaN then stays, as the reduction form's first equal element)."""

    from .index import flatten

    taps = _taps(kernel)
    unset = vals.const(n, torch.int64)

    def index(oc):
        best, idx = None, unset
        for rc in taps:
            full, conds = coords(oc, rc)
            v = value(oc, rc)
            at = vals.index_value(flatten(full[lead:], pooled))
            if best is None:
                take = None
            else:
                more = call("gt", v, best)
                nan = call("and", call("ne", v, v), call("eq", best, best), dtype=torch.bool)
                take = call("or", call("eq", idx, unset), call("or", more, nan, dtype=torch.bool), dtype=torch.bool)
            ok = _cond_value(conds)
            if ok is not None:
                take = ok if take is None else call("and", ok, take, dtype=torch.bool)
            if take is None:
                best, idx = v, at
            else:
                best = v if best is None else call("where", take, v, best)
                idx = call("where", take, at, idx, dtype=torch.int64)
        return idx
    return LTensor(tuple(shape), torch.int64, index)


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
    xb = ctx.contiguous(x, "pool_in")
    buf = xb.buffer
    coords, lead = _pool_windows(x, shape, kernel, stride, padding, [1] * nsp)
    from .index import flatten
    acc = _acc(x.dtype)

    def fn(oc, rc):
        full, conds = coords(oc, rc)
        return vals.cast(vals.load(buf.name, flatten(full, x.shape), buf.dtype, tuple(conds)), acc)
    total = _pool_reduce(ctx, "sum", shape, kernel, fn, acc, "avgpool")
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
    return _adaptive(ctx, node, x, out_size, "max", indices=True)   # (an unread indices kernel is dropped)


@register("aten._adaptive_avg_pool1d", "aten._adaptive_avg_pool2d", "aten._adaptive_avg_pool3d",
          "aten.adaptive_avg_pool1d")
def _adaptive_avg(ctx, node, x, out_size):
    return _adaptive(ctx, node, x, out_size, "sum")


def _separable_window_sum(ctx, xb, lead, outs, kmax, window, acc):
    """Sums over adaptive windows (a box in every pooled dim) one pooled dim at a time, the OUTERMOST first:
    pass d sums at most kmax[d] taps along dim d (written out when few, a reduction otherwise) into a buffer
    that keeps the dims after d whole, so neighbouring outputs of a pass are neighbouring elements of its
    source and every tap is a coalesced load (masked to the window: nothing outside it is read); the
    innermost dim comes last, on an intermediate kmax[0]... times smaller, and fuses with what follows.
    (Innermost first, as tried before, put neighbouring outputs a window apart: 0.25x eager on level1/109
    against one reduction's 0.45x.)"""
    from .index import flatten, variables

    src = xb.buffer
    cur = tuple(xb.shape)
    nsp = len(outs)
    total = None
    for d in range(nsp):
        ax = lead + d
        shape = cur[:ax] + (outs[d],) + cur[ax + 1:]

        def fn(oc, rc, src=src, cur=cur, ax=ax, d=d):
            start, end = window(oc, d)
            e = add(start, rc[0])
            c = list(oc)
            c[ax] = e
            past = add(e, end * -1)         # the tap is in the window while past < 0
            if not variables(past):         # windows of one size: a constant test (no mask, or no tap)
                if past.c >= 0:
                    return vals.const(0.0, acc)
                conds = ()
            else:
                conds = (("lt", past, 0),)
            return vals.cast(vals.load(src.name, flatten(c, cur), src.dtype, conds), acc)
        total = _pool_reduce(ctx, "sum", shape, [kmax[d]], fn, acc, f"adaptive{d}")
        if d < nsp - 1:
            total = ctx.realize(total, f"adaptive{d}")
            src, cur = total.buffer, shape
    return total


def _adaptive(ctx, node, x, out_size, kind, indices=False):
    val = node.meta["val"]
    shape = tuple(val[0].shape if isinstance(val, (tuple, list)) else val.shape)
    nsp = len(out_size)
    lead = len(x.shape) - nsp
    ins = x.shape[lead:]
    outs = shape[lead:]
    kmax = [max(-(-((o + 1) * i) // on) - (o * i) // on for o in range(on)) for i, on in zip(ins, outs)]
    xb = ctx.contiguous(x, "pool_in")
    buf = xb.buffer
    from .index import flatten
    acc = _acc(x.dtype)

    def window(c, d):
        i, on = ins[d], outs[d]
        start = floordiv(c[lead + d] * i, on)
        end = floordiv(add(c[lead + d] * i, const(i + on - 1)), on)
        return start, end

    def coords(oc, rc):
        full, conds = list(oc[:lead]), []
        for d in range(nsp):
            start, end = window(oc, d)
            e = add(start, rc[d])
            conds.append(("lt", add(e, end * -1), 0))  # e < end
            full.append(e)
        return full, conds

    def fn(oc, rc):
        full, conds = coords(oc, rc)
        ok = None
        for cnd in conds:
            t = call("lt", vals.index_value(cnd[1]), vals.const(0, torch.int64))
            ok = t if ok is None else call("and", ok, t, dtype=torch.bool)
        v = vals.cast(vals.load(buf.name, flatten(full, x.shape), buf.dtype), acc)
        return call("where", ok, v, vals.const(0.0 if kind == "sum" else -math.inf, acc))
    if kind == "sum" and nsp > 1 and math.prod(kmax) > POOL_TAPS and all(o > 1 for o in outs):
        total = _separable_window_sum(ctx, xb, lead, outs, kmax, window, acc)
    else:   # (a global pool, an output of 1 in a dim, reads whole contiguous rows: one reduction serves it)
        total = _pool_reduce(ctx, kind, shape, kmax, fn, acc, "adaptive")
    if kind == "max":
        out = total if x.dtype == acc else LTensor(shape, x.dtype, lambda c: vals.cast(total(c), x.dtype))
        return (out, _max_pool_indices(ctx, x, shape, kmax, coords, fn, total)) if indices else out

    def f(c):
        cnt = None
        for d in range(nsp):
            start, end = window(c, d)
            size = vals.index_value(add(end, start * -1))
            cnt = size if cnt is None else call("mul", cnt, size)
        return vals.cast(call("div", total(c), vals.cast(cnt, acc)), x.dtype)
    return LTensor(shape, x.dtype, f)
