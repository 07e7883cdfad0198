"""Direct convolution as an implicit GEMM whose A tiles are bulk tensor copies (TMA) from a channels-last,
zero-padded copy of the input (sm_90a, TF32 wgmma), fp32 in and out.

Why a copy. TF32 wgmma reads both operands K-major from shared memory. In the NC(D)HW layout the reduction's
channels are the slowest axis, so an im2col tile of `conv_igemm` is gathered element by element (scalar loads,
per-element bounds) by a producer warpgroup: latency-bound at 0.3-0.6x cuDNN. Here `to_ndhwc` writes the input
once as XP (N, D + 2 P, H + 2 P, W + 2 P, CP): channels last, the padding made of zeros, channels padded with
zeros to CP (a multiple of BK), rounded to TF32 (and its TF32 tail XL for 3xTF32). Then the A tile of output
pixels (n, od, oh, ow0 .. ow0 + BM) at tap (kd, kh, kw) and channels c0 .. c0 + BK is one box of XP,

    XP[n, od * S0 + kd * D0, oh * S1 + kh * D1, ow0 + kw * D2 : ... + BM, c0 : c0 + BK]     (S2 == 1)

already K-major, copied by the TMA engine with no index arithmetic per element; pixels past the padded row
read zeros (the engine's out-of-bounds fill) and are masked at the store. A stride S2 > 1 along W (a box has
unit element stride) is a layout of the copy (`to_ndhwc_phased`): each padded row stored as its S2 phases
(columns w % S2 == q together), so tap kw reads phase (kw D2) % S2 from column ow0 + (kw D2) // S2 on, one box
again; D and H share one dim of the copy, (N, DP * HP, S2, ceil(WP / S2), CP), which keeps it at rank 5.
A 1x1 convolution is the special case of one tap: a batched GEMM out[n] = W @ x[n], its only copy the
transposed input (TF32 wgmma cannot read the NCHW operand, which is MN-major, in place).

GEMM view, group g (grid z): rows = one output row segment of BM pixels, columns = output channels co of the
group (grid x runs over (n, od, oh, ow tile) x channel tiles, channel tiles fastest), k = tap * CIGP + ci, the
weight laid out by `weight_tma` (G, Cout/G, taps * CIGP), zeros at the padded channels. Groups need
Cin/G % BK == 0 (the group's channels are whole channel tiles of XP); one group pads its channels to BK.

Warp roles as `gemm_fp32.py`: warpgroup 0 issues the copies into a ring of STAGES stages (`full[s]`),
warpgroups 1..CONSUMERS run wgmma on 64 rows each and release the stage (`empty[s]`). `SPLIT=True`: 3xTF32
(a_lo b_hi + a_hi b_lo + a_hi b_hi per k-tile into a fresh accumulator, f32 adds across k-tiles, as
`gemm_fp32.py`), fp32-accurate; `SPLIT=False`: one TF32 product (cuDNN's default for fp32 convolutions).
The epilogue stores into Y viewed as (N, G, Cout/G, output pixels), which is the output itself; a lowering
may fuse a pointwise epilogue there (`argus_agent/lower/templates.py`). STAGED=1 (the policy's choice where 3
ring stages fit beside it): the accumulator goes channel-major through shared memory and is stored along pixels,
16-byte vectors, EC channels at a time (the tile is pixels q0 .. q0 + BM of image nq); a fused epilogue runs in
that layout. STAGED=0 stores from the accumulator's registers (rows `m0 + arange(BM)`, pixel p % OVOL of image
p // PVOL, as in conv_igemm), one scalar a lane over 8 pixels x 4 channel pairs: on H100 level3/020's shortcut
with a fused BN + residual + ReLU took 489 us that way, 151 staged.

Host API: `launch(x, w, y, stride, padding, dilation, groups, split=True)` on torch tensors (CUDA: compiled;
CPU: the interpreter) or numpy arrays; `applies(...)` says whether a convolution takes this kernel.
"""

import math
import os

import numpy as np

import tilepy as tp


def _threads(c):
    return 128 * (1 + c["CONSUMERS"])


@tp.kernel(threads=128)
def to_ndhwc(X: tp.Tensor[tp.f32, "N", "C", "D", "H", "W"], XH: tp.Tensor[tp.f32, "N", "DP", "HP", "WP", "CP"],
             XL: tp.Tensor[tp.f32, "N", "DP", "HP", "WP", "CP"], PA: tp.constexpr = (0, 1, 1),
             SPLIT: tp.constexpr = False, T: tp.constexpr = 32):
    """XH[n, d, h, w, c] = round_tf32(X[n, c, d - P0, h - P1, w - P2]), 0 outside X (the padding, channels past
    C); XL the TF32 tail (SPLIT). Block (w tile, c tile, (n, d, h)): a (T, T) tile read along w, written along c
    (the transpose goes through shared memory, so both sides are whole rows)."""
    w0 = tp.block_id(0) * T
    c0 = tp.block_id(1) * T
    z = tp.block_id(2)
    hp = z % XH.shape[2]
    dp = z // XH.shape[2] % XH.shape[1]
    n = z // (XH.shape[2] * XH.shape[1])
    x = tp.load(X[n, c0:c0 + T, dp - PA[0], hp - PA[1], w0 - PA[2]:w0 - PA[2] + T])
    hi = tp.round_tf32(x)
    rows = tp.blocked((T, T), 128, 4)
    tp.store(XH[n, dp, hp, w0:w0 + T, c0:c0 + T], tp.convert_layout(hi.T, rows))
    if SPLIT:
        lo = tp.round_tf32(x - hi)
        tp.store(XL[n, dp, hp, w0:w0 + T, c0:c0 + T], tp.convert_layout(lo.T, rows))


@tp.kernel(threads=128)
def to_ndhwc_phased(X: tp.Tensor[tp.f32, "N", "C", "D", "H", "W"], XH: tp.Tensor[tp.f32, "XN"],
                    XL: tp.Tensor[tp.f32, "XN"], PA: tp.constexpr = (0, 1, 1), XS: tp.constexpr = (1, 8, 8),
                    S2: tp.constexpr = 2, CP: tp.constexpr = 32, SPLIT: tp.constexpr = False,
                    T: tp.constexpr = 32):
    """The copy for a stride S2 > 1 along W: XH as (N, DP * HP, S2, WQ, CP), WQ = ceil(WP / S2), element
    [n, d HP + h, w % S2, w // S2, c] = round_tf32(X[n, c, d - P0, h - P1, w - P2]) (0 outside X), so each of
    the stride's phases of a padded row is contiguous: the taps kw of one phase (kw D2 % S2) read one box.
    Block (w tile of S2 WQ, c tile, (n, d, h)); the stores go row by row to their phase (flat offsets)."""
    WQ = (XS[2] + S2 - 1) // S2
    w0 = tp.block_id(0) * T
    c0 = tp.block_id(1) * T
    z = tp.block_id(2)
    hp = z % XS[1]
    dp = z // XS[1] % XS[0]
    n = z // (XS[1] * XS[0])
    x = tp.load(X[n, c0:c0 + T, dp - PA[0], hp - PA[1], w0 - PA[2]:w0 - PA[2] + T])
    hi = tp.round_tf32(x)
    rows = tp.blocked((T, T), 128, 4)
    w = w0 + tp.arange(T)[:, None]
    c = c0 + tp.arange(T)[None, :]
    off = (((n * XS[0] + dp) * XS[1] + hp) * S2 + w % S2) * WQ * CP + w // S2 * CP + c
    keep = (w < S2 * WQ) & (c < CP)
    tp.store(XH[off], tp.convert_layout(hi.T, rows), mask=keep)
    if SPLIT:
        lo = tp.round_tf32(x - hi)
        tp.store(XL[off], tp.convert_layout(lo.T, rows), mask=keep)


@tp.kernel(threads=_threads, target="sm_90a")
def conv_tma(XH: tp.Tensor[tp.f32, "N", "DHP", "SQ", "WQ", "CP"], XL: tp.Tensor[tp.f32, "N", "DHP", "SQ", "WQ", "CP"],
             WH: tp.Tensor[tp.f32, "GP", "COG", "KP"], WL: tp.Tensor[tp.f32, "GP", "COG", "KP"],
             Y: tp.Tensor[tp.f32, "NY", "G", "COGY", "OV"],
             OS: tp.constexpr = (1, 8, 8), KS: tp.constexpr = (1, 3, 3), ST: tp.constexpr = (1, 1, 1),
             DI: tp.constexpr = (1, 1, 1), OFF: tp.constexpr = (0, 0, 0), HP: tp.constexpr = 10,
             CIGP: tp.constexpr = 32,
             SPLIT: tp.constexpr = True,
             BM: tp.constexpr = 128, BN: tp.constexpr = 128, BK: tp.constexpr = 32, STAGES: tp.constexpr = 3,
             CONSUMERS: tp.constexpr = 2, INSTR: tp.constexpr = tp.nv.wgmma_m64n128k8_tf32,
             SWIZZLE: tp.constexpr = tp.Swizzle(3, 2, 3), STAGED: tp.constexpr = 0):
    """Y[:, group z] = the convolution of XP (XH + XL if SPLIT, else XH) with the weight (WH + WL, else WH).
    STAGED=1: the accumulator goes through shared memory and is stored along pixels (see the epilogue)."""
    OVOL = OS[0] * OS[1] * OS[2]
    PVOL = OVOL
    KVOL = KS[0] * KS[1] * KS[2]
    WT = (OS[2] + BM - 1) // BM         # row segments per output row
    CT = CIGP // BK                     # channel tiles per tap
    g = tp.block_id(2)
    cog = WH.shape[1]
    # block x = (n, od, oh, ow tile) * channel tiles + channel tile: the blocks running at once read the same
    # A boxes (the input, the large operand) for every channel tile; the weight is small and stays in L2
    NT = (cog + BN - 1) // BN
    t = tp.block_id(0) // NT
    n0 = tp.block_id(0) % NT * BN
    ow0 = t % WT * BM
    r = t // WT                         # the output row (n, od, oh), flat
    m0 = r * OS[2] + ow0                # the flat output pixel of row 0
    a_hi = tp.shared((BM, BK), tp.f32, stages=STAGES, swizzle=SWIZZLE)
    b_hi = tp.shared((BN, BK), tp.f32, stages=STAGES, swizzle=SWIZZLE)   # K-major: the (N, K) tile
    if SPLIT:                           # the TF32 tails
        a_lo = tp.shared((BM, BK), tp.f32, stages=STAGES, swizzle=SWIZZLE)
        b_lo = tp.shared((BN, BK), tp.f32, stages=STAGES, swizzle=SWIZZLE)
    # full[s]: the copies into stage s landed; empty[s]: the consumers are done reading stage s.
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    if STAGED:
        # the tile channel-major, (channel, pixel): a row of BM pixels is contiguous; padded by 4 so the
        # accumulator's stores (8 pixels x 4 channel pairs a warp) fall in 32 distinct banks
        c_s = tp.shared((BN, BM), tp.f32, layout=tp.Layout((BN, BM), (BM + 4, 1)))
        staged = tp.mbarrier(1)         # the consumers' accumulators are in c_s
    k_tiles = KVOL * CT
    rounds = tp.cdiv(k_tiles, STAGES)   # round j uses every stage once: tile k = j * STAGES + s
    LC = tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1))
    EC = 32 if BN > 32 else BN          # the staged epilogue's channels at a time
    LE = tp.blocked((EC, BM), 128 * CONSUMERS, 4)   # its layout: 4 consecutive pixels a value
    if tp.warpgroup_id() == 0:          # producer: one thread issues the bulk tensor copies
        oh = r % OS[1]
        od = r // OS[1] % OS[0]
        nb = r // (OS[1] * OS[0])
        for j in range(rounds):
            for s in tp.static_range(STAGES):
                kt = j * STAGES + s
                if kt < k_tiles:
                    if j > 0:
                        tp.mbarrier_wait(empty[s], j - 1)    # the consumers released stage s (round j - 1)
                    tap = kt // CT
                    c0 = g * CIGP + kt % CT * BK
                    kd = tap // (KS[1] * KS[2]) if KS[0] > 1 else 0
                    kh = tap // KS[2] % KS[1] if KS[1] > 1 else 0
                    kw = tap % KS[2] if KS[2] > 1 else 0
                    xdh = (od * ST[0] + kd * DI[0] + OFF[0]) * HP + oh * ST[1] + kh * DI[1] + OFF[1]
                    # padded column ow S2 + kw D2 + OFF2: phase (kw D2 + OFF2) % S2, from ow + (kw D2 + OFF2) // S2
                    q = (kw * DI[2] + OFF[2]) % ST[2] if ST[2] > 1 else 0
                    xw = ow0 + (kw * DI[2] + OFF[2]) // ST[2]
                    tp.copy_bulk(XH[nb, xdh, q, xw:xw + BM, c0:c0 + BK], a_hi[s], full[s])
                    if SPLIT:
                        tp.copy_bulk(XL[nb, xdh, q, xw:xw + BM, c0:c0 + BK], a_lo[s], full[s])
                    tp.copy_bulk(WH[g, n0:n0 + BN, kt * BK:kt * BK + BK], b_hi[s], full[s])
                    if SPLIT:
                        tp.copy_bulk(WL[g, n0:n0 + BN, kt * BK:kt * BK + BK], b_lo[s], full[s])
                    tp.mbarrier_arrive(full[s])
    else:                               # consumers: wgmma on 64 rows each
        acc = tp.zeros((BM, BN), tp.f32, layout=LC)
        for j in range(rounds):
            for s in tp.static_range(STAGES):
                kt = j * STAGES + s
                if kt < k_tiles:
                    tp.mbarrier_wait(full[s], j)             # stage s holds tile kt
                    if SPLIT:
                        part = tp.zeros((BM, BN), tp.f32, layout=LC)
                        part = tp.mma(a_lo[s], b_hi[s].T, part)
                        part = tp.mma(a_hi[s], b_lo[s].T, part)
                        part = tp.mma(a_hi[s], b_hi[s].T, part)
                        tp.mbarrier_arrive(empty[s])
                        acc = acc + part                     # round-to-nearest f32 adds across k-tiles
                    else:
                        acc = tp.mma(a_hi[s], b_hi[s].T, acc)
                        tp.mbarrier_arrive(empty[s])
        # epilogue: output element (pixel p, channel g * COG + c); a lowering may fuse a pointwise chain here
        if STAGED:
            # Y is (channel, pixel) with pixels contiguous, the accumulator's lanes run over 8 pixels and 4
            # channel pairs: stored from the registers, every lane writes one scalar and a fused epilogue reads
            # its operands the same way (per-channel values once per element). Through c_s the consumers hold
            # 4 consecutive pixels of one channel per value instead (16-byte stores along pixels, a warp's
            # lanes whole rows of pixels, per-channel operands one broadcast load per 4 pixels), EC channels at
            # a time (a fused epilogue's operands stay in registers). The tile is one output row segment: one
            # image nq, pixels q0 .. q0 + BM of it (those past the row's end masked).
            tp.store(c_s.T, acc)
            tp.mbarrier_arrive(staged)
            tp.mbarrier_wait(staged, 0)                      # every consumer's part of the tile is in c_s
            nq = m0 // PVOL
            q0 = m0 % PVOL
            for e0 in tp.static_range(0, BN, EC):
                v = tp.load(c_s[e0:e0 + EC, :], layout=LE)
                c = n0 + e0 + tp.arange(EC)[:, None]
                keep = (ow0 + tp.arange(BM)[None, :] < OS[2]) & (c < cog)
                tp.store(Y[nq, g, n0 + e0:n0 + e0 + EC, q0:q0 + BM], v, mask=keep)   # EPILOGUE STAGED
        else:
            p = m0 + tp.arange(BM)[:, None]
            c = n0 + tp.arange(BN)[None, :]
            keep = (ow0 + tp.arange(BM)[:, None] < OS[2]) & (c < cog)
            tp.store(Y[p // PVOL, g, c, p % OVOL], acc, mask=keep)   # EPILOGUE


PRESETS = {
    # (3xTF32 at 3 stages of 128 x 128: no room for the staged tile; `policy` picks STAGED per convolution)
    "sm_90a": dict(BM=128, BN=128, BK=32, STAGES=3, CONSUMERS=2, INSTR=tp.nv.wgmma_m64n128k8_tf32, STAGED=0),
}

# ARGUS_CONV_TMA_STAGED=0: the policy stores the accumulator from the registers (STAGED=0) everywhere
STAGED_EPILOGUE = os.environ.get("ARGUS_CONV_TMA_STAGED", "1") == "1"

# the smallest input channel count per group that takes this kernel (fewer: most of each k-tile would be the
# zero padding of the channels; conv_igemm's gather serves them)
MIN_CIG = 16


def _three(v, nsp, fill):
    v = list(v) if isinstance(v, (list, tuple)) else [v] * nsp
    v = v * nsp if len(v) == 1 else v
    return tuple([fill] * (3 - nsp) + [int(e) for e in v])


def applies(x_shape, w_shape, stride, dilation, groups, transposed) -> bool:
    """Whether a convolution takes conv_tma: direct, Cin/G of at least MIN_CIG (and a multiple of 32 when
    grouped), grid and offsets within the hardware's and 32-bit limits."""
    if transposed:
        return False
    cig = int(x_shape[1]) // groups
    if cig < MIN_CIG or (groups > 1 and cig % 32):
        return False
    geo = geometry(x_shape, w_shape, None, stride, 0, dilation, groups)
    n, (dp, hp, _), cp = int(x_shape[0]), geo["XS"], geo["CP"]
    return n * dp * hp < 65536 and n * math.prod(geo["XQ"]) * cp < 2**31


def geometry(x_shape, w_shape, y_shape, stride, padding, dilation, groups, copy=None) -> dict:
    """Constexprs and sizes of a convolution: OS, KS, ST, DI, CIGP (the group's channels padded to BK), BK,
    PA (the padding the copy writes), XV (the 3-D spatial view of x the copy reads), XS (the padded input's
    spatial sizes), XQ (the copy's (DP * HP, S2, WQ) dims between N and CP: the stride's phases of each padded
    row, WQ = ceil(WP / S2)), CP (its channels), OFF (where the convolution's own padded coordinates start in the
    copy's). A 1x1 convolution (unit stride, no padding) views its pixels as one row. `copy` = (left padding,
    padded sizes) per spatial dim (3-D): a copy shared with other convolutions of the same input (the phases of
    a transposed one), padded at least as much as this one; then OFF = its left padding - this padding."""
    nsp = len(x_shape) - 2
    cig = int(x_shape[1]) // groups
    bk = 32 if cig >= 32 or groups > 1 else 16
    cigp = -(-cig // bk) * bk
    pa, ks, st = _three(padding, nsp, 0), _three(w_shape[2:], nsp, 1), _three(stride, nsp, 1)
    xv = _three(x_shape[2:], nsp, 1)
    pointwise = ks == st == (1, 1, 1) and pa == (0, 0, 0) and copy is None
    if pointwise:       # a 1x1 convolution: the pixels as one row (no row segment is cut short at a row's end)
        xv = (1, 1, xv[0] * xv[1] * xv[2])
    off = (0, 0, 0)
    if copy is None:
        xs = tuple(i + 2 * p for i, p in zip(xv, pa))
    else:
        off = tuple(int(c) - p for c, p in zip(copy[0], pa))
        pa, xs = tuple(int(c) for c in copy[0]), tuple(int(c) for c in copy[1])
        if min(off) < 0 or any(s < i + p for s, i, p in zip(xs, xv, pa)):
            raise ValueError(f"a shared copy padded {pa} to {xs} does not hold x {xv} padded by {padding}")
    xq = (xs[0] * xs[1], st[2], -(-xs[2] // st[2]))
    geo = dict(KS=ks, ST=st, DI=_three(dilation, nsp, 1), CIGP=cigp, BK=bk, PA=pa, XV=xv, XS=xs, XQ=xq,
               CP=cigp * groups, OFF=off)
    if y_shape is not None:
        geo["OS"] = xv if pointwise else _three(y_shape[2:], nsp, 1)
    return geo


def policy(geo: dict, cog: int, split: bool) -> dict:
    """Tiles: BM 128 pixels (two consumer warpgroups) where an output row has more than 64, else 64 (one);
    BN the smallest wgmma width >= Cout/G (32..128); as many stages as fit in shared memory beside the staged
    epilogue's tile (STAGED), which takes its place where fewer than 3 stages would be left (3xTF32 at BM 128:
    the ring keeps its depth, the accumulator is stored from the registers)."""
    from stdlib_kernels.conv_igemm import tile_n

    bm, cons = (128, 2) if geo["OS"][2] > 64 else (64, 1)
    tiles = tile_n(cog)
    bk = geo["BK"]
    stage = (bm + tiles["BN"]) * bk * 4 * (2 if split else 1)
    budget = 200 * 1024
    staged = int(STAGED_EPILOGUE and (budget - tiles["BN"] * (bm + 4) * 4) // stage >= 3)
    stages = max(2, min(6, (budget - staged * tiles["BN"] * (bm + 4) * 4) // stage))
    return dict(BM=bm, CONSUMERS=cons, BK=bk, STAGES=stages, STAGED=staged,
                SWIZZLE=tp.Swizzle(3 if bk == 32 else 2, 2, 3), **tiles)


def kernel_params(geo: dict, cog: int, split: bool) -> dict:
    """Every constexpr of the conv_tma launch."""
    return {**PRESETS["sm_90a"], **policy(geo, cog, split), "OS": geo["OS"], "KS": geo["KS"], "ST": geo["ST"],
            "DI": geo["DI"], "OFF": geo.get("OFF", (0, 0, 0)), "HP": geo["XS"][1], "CIGP": geo["CIGP"],
            "SPLIT": bool(split)}


def grid(batch: int, params: dict, cog: int, groups: int) -> tuple:
    """(row segments of every output row x channel tiles, 1, groups)."""
    os_ = params["OS"]
    return (batch * os_[0] * os_[1] * tp.cdiv(os_[2], params["BM"]) * tp.cdiv(cog, params["BN"]), 1, groups)


def copy_grid(batch: int, geo: dict) -> tuple:
    """The grid of to_ndhwc (unit W stride) or to_ndhwc_phased: (w tiles, channel tiles, (n, d, h))."""
    dp, hp, wp = geo["XS"]
    _, s2, wq = geo["XQ"]
    return (tp.cdiv(wp if s2 == 1 else s2 * wq, 32), tp.cdiv(geo["CP"], 32), batch * dp * hp)


def copy_call(geo: dict, split: bool) -> tuple:
    """(kernel name, constexprs, view of the workspace it writes) of the channels-last copy: the workspace is
    allocated as (N, *XQ, CP); to_ndhwc writes it as (N, DP, HP, WP, CP), to_ndhwc_phased flat."""
    if geo["XQ"][1] == 1:
        return "to_ndhwc", dict(PA=geo["PA"], SPLIT=bool(split)), tuple(geo["XS"]) + (geo["CP"],)
    return ("to_ndhwc_phased", dict(PA=geo["PA"], XS=geo["XS"], S2=geo["XQ"][1], CP=geo["CP"], SPLIT=bool(split)),
            (-1,))


def weight_tma(w, groups: int, geo: dict):
    """B (G, Cout/G, taps * CIGP): column t * CIGP + ci holds w[g * COG + co, ci, tap t], zeros for ci >= Cin/G;
    w is (Cout, Cin/G, *k) as torch keeps it (numpy or torch)."""
    co, cig = int(w.shape[0]), int(w.shape[1])
    cog, cigp = co // groups, geo["CIGP"]
    if isinstance(w, np.ndarray):
        w3 = w.reshape(groups, cog, cig, -1).transpose(0, 1, 3, 2)
        out = np.zeros((groups, cog, w3.shape[2], cigp), w.dtype)
        out[..., :cig] = w3
        return out.reshape(groups, cog, -1)
    import torch

    w3 = w.reshape(groups, cog, cig, -1).permute(0, 1, 3, 2)
    out = torch.zeros((groups, cog, w3.shape[2], cigp), dtype=w.dtype, device=w.device)
    out[..., :cig] = w3
    return out.reshape(groups, cog, -1)


def launch(x, w, y, stride=1, padding=0, dilation=1, groups=1, split=True, target: str = "sm_90a", copy=None,
           **constexprs):
    """y = conv(x, w), fp32 out; `split` picks 3xTF32 (fp32-accurate) or one TF32 pass; `copy`: the
    channels-last copy's (left padding, padded sizes) when it is padded more than this convolution needs (as a
    copy shared by several convolutions is; `geometry`)."""
    from stdlib_kernels import gemm_fp32

    if not applies(x.shape, w.shape, stride, dilation, groups, False):
        raise ValueError(f"conv_tma does not take x {tuple(x.shape)}, w {tuple(w.shape)}, stride {stride}, "
                         f"groups {groups}: use conv_igemm")
    geo = geometry(x.shape, w.shape, y.shape, stride, padding, dilation, groups, copy)
    nb, ci = int(x.shape[0]), int(x.shape[1])
    x5 = x.reshape((nb, ci) + geo["XV"])
    xs = (nb,) + geo["XQ"] + (geo["CP"],)
    if isinstance(x, np.ndarray):
        xh = np.full(xs, np.nan, np.float32)       # NaN: an element the copy does not write and a box reads fails
        xl = np.full(xs, np.nan, np.float32) if split else xh
    else:
        import torch
        xh = torch.empty(xs, dtype=torch.float32, device=x.device)
        xl = torch.empty(xs, dtype=torch.float32, device=x.device) if split else xh
    name, cx, view = copy_call(geo, split)
    view = view if view == (-1,) else (nb,) + view
    copy = to_ndhwc if name == "to_ndhwc" else to_ndhwc_phased
    copy[copy_grid(nb, geo)](x5, xh.reshape(view), xl.reshape(view), **cx)
    wk = weight_tma(w, groups, geo)
    wh, wl = gemm_fp32.split(wk, "nk")
    cog = int(wk.shape[1])
    params = {**kernel_params(geo, cog, split), **constexprs}
    y4 = y.reshape(nb, groups, cog, -1)
    return conv_tma[grid(nb, params, cog, groups)](xh, xl, wh, wl if split else wh, y4, target=target, **params)


if __name__ == "__main__":
    from stdlib_kernels.conv_igemm import reference

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 16, 5, 9)).astype(np.float32)
    w = rng.standard_normal((8, 16, 3, 3)).astype(np.float32)
    ref = reference(x, w, 1, 1, 1, 1)
    y = np.full(ref.shape, np.nan, np.float32)
    launch(x, w, y, 1, 1, 1, 1, STAGES=2)
    print("rel err =", float(np.linalg.norm(y - ref) / np.linalg.norm(ref)))
