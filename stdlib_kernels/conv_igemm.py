"""Convolution (1-3D, direct or transposed, grouped, strided, padded, dilated) as an implicit GEMM on the
tensor cores (sm_90a, TF32 wgmma), fp32 in and out. The im2col matrix never exists in global memory: the
producer warpgroup gathers each (BM, BK) tile of it from the input straight into shared memory.

GEMM view, one GEMM per group g (grid z): rows p are output pixels (n, od, oh, ow), columns output channels
co of the group, the reduction runs over k = (ci, kd, kh, kw), ci the group's input channel:

    direct:      A[p, k] = X[n, g * CIG + ci, od * S - P + kd * D, oh * S - P + kh * D, ow * S - P + kw * D]
    transposed:  A[p, k] = X[n, g * CIG + ci, (od + P - kd * D) / S, ...]   where every division is exact
    B[k, co]     = WH[g, co, k] (+ WL[g, co, k]): the weight as (G, Cout/G, K), K-major, K padded to 4

1-D and 2-D convolutions are 3-D ones with unit leading sizes. X is read flat, at offsets computed from the
compile-time sizes (NB, CI, IS); padding, the tile edges and k past K are masked: they read 0. A transposed
convolution is the gradient form of a direct one: output pixel o takes tap kd from input (o + P - kd * D) / S
when that is a whole number, so it is the same GEMM with another gather and no zero-inserted input. With a
stride (and dilation 1) it runs PHASED (`geometry` sets it): output phase a (o = a + S j per dim) takes only
the taps k = (a + P) % S + S t, a direct unit-stride convolution over j, so no gathered tap is a stride hole;
grid z runs groups x phases in one launch, each phase with its own weight rows (`weight_phased`), the store
goes to a + S j (a fused epilogue included), and a tap the phase lacks is a skipped k-tile (CIG % BK == 0) or a
masked column. (H100, l1_099 TF32: 0.20x -> 0.35x cuDNN; level2/003's 3-D one 0.06x -> 0.37x, in 3xTF32
0.18x -> 1.21x, the first form of the phases: benchmarks/results/conv-*.json.)

Precision. `SPLIT=True` (3xTF32, fp32-accurate): every element is split into a TF32 head and tail as it is
gathered (hi = round_tf32(x), lo = round_tf32(x - hi); the weight once, by `gemm_fp32.split_tf32`), and each
k-tile adds a_lo b_hi + a_hi b_lo + a_hi b_hi into a fresh accumulator that is added to the long sum with
f32 adds (as `gemm_fp32.py`). `SPLIT=False`: one TF32 product (what cuDNN computes for fp32 convolutions
while `torch.backends.cudnn.allow_tf32` is on, PyTorch's default); the inputs are rounded to TF32.

Warp roles (as `gemm_fp32.py`): warpgroup 0 produces a ring of STAGES stages: the weight tile by bulk tensor
copy (TMA) and the input tile by gather loads (threads along the pixels, so the loads coalesce along the
output row) stored into the swizzled K-major A tile, then one arrival on `full[s]`; warpgroups 1..CONSUMERS
run wgmma on 64 rows each and release the stage on `empty[s]`. The epilogue scatters the accumulator into
Y viewed as (N, G, Cout/G, output pixels), which is the (N, Cout, *spatial) output itself (a lowering may
replace that store by a fused pointwise epilogue: see `argus_agent/lower/templates.py`).

Host API: `launch(x, w, y, stride, padding, dilation, groups, transposed, split=True)` on torch tensors
(CUDA: compiled; CPU: the interpreter) or numpy arrays; `y` has the size torch gives.
"""

import numpy as np

import tilepy as tp


def _threads(c):
    return 128 * (1 + c["CONSUMERS"])


@tp.kernel(threads=_threads, target="sm_90a")
def conv_igemm(X: tp.Tensor[tp.f32, "XN"], WH: tp.Tensor[tp.f32, "GP", "COG", "KP"],
               WL: tp.Tensor[tp.f32, "GP", "COG", "KP"], Y: tp.Tensor[tp.f32, "N", "G", "COG", "OV"],
               OS: tp.constexpr = (1, 8, 8), KS: tp.constexpr = (1, 3, 3), ST: tp.constexpr = (1, 1, 1),
               PA: tp.constexpr = (0, 1, 1), DI: tp.constexpr = (1, 1, 1), CIG: tp.constexpr = 4,
               TRANSPOSED: tp.constexpr = False, PHASED: tp.constexpr = False, TAPS: tp.constexpr = False,
               SPLIT: tp.constexpr = True,
               NB: tp.constexpr = 1,
               CI: tp.constexpr = 4, IS: tp.constexpr = (1, 8, 8),
               BM: tp.constexpr = 128, BN: tp.constexpr = 128, BK: tp.constexpr = 32, STAGES: tp.constexpr = 3,
               CONSUMERS: tp.constexpr = 2, INSTR: tp.constexpr = tp.nv.wgmma_m64n128k8_tf32,
               SWIZZLE: tp.constexpr = tp.Swizzle(3, 2, 3)):
    """Y[:, group z] = the convolution of X with the weight halves (WH + WL if SPLIT, else WH)."""
    OVOL = OS[0] * OS[1] * OS[2]
    KVOL = KS[0] * KS[1] * KS[2]
    GR = CI // CIG
    # PHASED (a transposed convolution with a stride, dilation 1): block z runs output phase ph = z // GR of
    # group g = z % GR, the output pixels o = a + S j (a = ph per dim). Tap k meets input (o + P - k) / S only
    # for k = k0 + S t, k0 = (a + P) % S, at input j + c - t, c = (a + P) // S: a direct convolution of unit
    # stride over j with the phase's tk = ceil((K - k0) / S) taps per dim, its weight WH[z] (taps major on the
    # largest phase's tap grid, then the group's input channels, as `weight_phased` lays it out). Rows run over
    # the pixel grid PS = ceil(OS / S) of the largest phase; the rows a smaller phase lacks are masked.
    PS0 = (OS[0] + ST[0] - 1) // ST[0] if PHASED else OS[0]
    PS1 = (OS[1] + ST[1] - 1) // ST[1] if PHASED else OS[1]
    PS2 = (OS[2] + ST[2] - 1) // ST[2] if PHASED else OS[2]
    PVOL = PS0 * PS1 * PS2
    z = tp.block_id(2)
    g = z % GR if PHASED else z
    ph = z // GR
    a0 = ph // (ST[1] * ST[2]) if PHASED else 0
    a1 = ph // ST[2] % ST[1] if PHASED else 0
    a2 = ph % ST[2] if PHASED else 0
    c0 = (a0 + PA[0]) // ST[0] if PHASED else 0
    c1 = (a1 + PA[1]) // ST[1] if PHASED else 0
    c2 = (a2 + PA[2]) // ST[2] if PHASED else 0
    tk0 = (KS[0] - (a0 + PA[0]) % ST[0] + ST[0] - 1) // ST[0] if PHASED else KS[0]
    tk1 = (KS[1] - (a1 + PA[1]) % ST[1] + ST[1] - 1) // ST[1] if PHASED else KS[1]
    tk2 = (KS[2] - (a2 + PA[2]) % ST[2] + ST[2] - 1) // ST[2] if PHASED else KS[2]
    # the reduction runs over the largest phase's taps TM0 x TM1 x TM2 (compile-time loop bounds: a run-time
    # trip count cost ~28 registers); tap t of phase ph is live while t < tk per dim (its weight is 0 past it)
    TM0 = (KS[0] + ST[0] - 1) // ST[0] if PHASED else KS[0]
    TM1 = (KS[1] + ST[1] - 1) // ST[1] if PHASED else KS[1]
    TM2 = (KS[2] + ST[2] - 1) // ST[2] if PHASED else KS[2]
    KRED = CIG * TM0 * TM1 * TM2 if PHASED else CIG * KVOL
    TILE_TAPS = PHASED and CIG % BK == 0    # every k-tile within one tap: a dead tap's tiles are skipped whole
    # k = t * CIG + ci (taps major: PHASED, or TAPS for any other convolution, its weight laid out by
    # `weight_taps`); with CIG % BK == 0 a k-tile's tap is one scalar, so a column's index math is ci alone
    TAPMAJOR = PHASED or TAPS
    cog = WH.shape[1]
    npix = NB * PVOL
    m0 = tp.block_id(0) * BM            # pixel tiles along x: the blocks running at once share weight tiles
    n0 = tp.block_id(1) * BN
    a_hi = tp.shared((BM, BK), tp.f32, stages=STAGES, swizzle=SWIZZLE)
    a_lo = tp.shared((BM, BK), tp.f32, stages=STAGES if SPLIT else 1, swizzle=SWIZZLE)
    b_hi = tp.shared((BN, BK), tp.f32, stages=STAGES, swizzle=SWIZZLE)   # K-major: the (N, K) tile
    b_lo = tp.shared((BN, BK), tp.f32, stages=STAGES if SPLIT else 1, swizzle=SWIZZLE)
    # full[s]: stage s holds its A and B tiles; empty[s]: the consumers are done reading stage s.
    full0 = tp.mbarrier(1)
    full1 = tp.mbarrier(1)
    full2 = tp.mbarrier(1)
    full3 = tp.mbarrier(1)
    empty0 = tp.mbarrier(1)
    empty1 = tp.mbarrier(1)
    empty2 = tp.mbarrier(1)
    empty3 = tp.mbarrier(1)
    full = (full0, full1, full2, full3)
    empty = (empty0, empty1, empty2, empty3)
    k_tiles = tp.cdiv(KRED, BK)
    rounds = tp.cdiv(k_tiles, STAGES)   # round j uses every stage once: tile k = j * STAGES + s
    LG = panel_layout(BM, BK)           # the gathered tile: a warp reads 32 neighbouring pixels per tap
    LC = tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1))
    if tp.warpgroup_id() == 0:          # producer: weight tiles by TMA, input tiles gathered
        px = m0 + tp.arange(BM)[:, None]
        live = px < npix
        pu = tp.cast(px, tp.u32)             # p >= 0: unsigned divisions by constants are cheap
        nb = tp.cast(pu // PVOL, tp.i32)
        od = tp.cast(pu % PVOL // (PS1 * PS2), tp.i32) if PS0 > 1 else 0
        oh = tp.cast(pu % (PS1 * PS2) // PS2, tp.i32) if PS1 > 1 else 0
        ow = tp.cast(pu % PS2, tp.i32)
        if PHASED:          # the phase's own rows: a + S j inside the output
            live = live & (od * ST[0] + a0 < OS[0]) & (oh * ST[1] + a1 < OS[1]) & (ow * ST[2] + a2 < OS[2])
        # Input coordinate d of (pixel, tap) = a pixel part + a tap part (direct: o * S - P + k * D; transposed:
        # (o + P) - k * D, to be divided by S). While no stride divides (direct, or transposed with unit
        # strides), the flat offset is also a pixel part plus a tap part, so each gathered element costs one
        # add for its address and one add and unsigned compare per spatial dim for its bounds (a negative
        # coordinate wraps past the size): 32-bit arithmetic on compile-time sizes, nothing per element that
        # a row or a column could do once.
        hd = od + c0 if PHASED else (od + PA[0] if TRANSPOSED else od * ST[0] - PA[0])
        hh = oh + c1 if PHASED else (oh + PA[1] if TRANSPOSED else oh * ST[1] - PA[1])
        hw = ow + c2 if PHASED else (ow + PA[2] if TRANSPOSED else ow * ST[2] - PA[2])
        prow = (((nb * CI + g * CIG) * IS[0] + hd) * IS[1] + hh) * IS[2] + hw
        for j in range(rounds):
            for s in tp.static_range(STAGES):
                kt = j * STAGES + s
                if kt < k_tiles:
                    if j > 0:
                        tp.mbarrier_wait(empty[s], j - 1)    # the consumers released stage s (round j - 1)
                    # a k-tile of one tap the phase lacks: no copy, gather or product (the consumers skip it)
                    if TILE_TAPS:
                        tq = kt // (CIG // BK)
                        tile_ok = ((tq // (TM1 * TM2) < tk0) & (tq % (TM1 * TM2) // TM2 < tk1)
                                   & (tq % TM2 < tk2))
                    else:
                        tile_ok = True
                    if tile_ok:
                        k0 = kt * BK
                        tp.copy_bulk(WH[z, n0:n0 + BN, k0:k0 + BK], b_hi[s], full[s])
                        if SPLIT:
                            tp.copy_bulk(WL[z, n0:n0 + BN, k0:k0 + BK], b_lo[s], full[s])
                        kk = k0 + tp.arange(BK)[None, :]
                        ku = tp.cast(kk, tp.u32)             # k >= 0: unsigned divisions by constants are cheap
                        if TAPMAJOR and CIG % BK == 0:      # one tap t of TM0 x TM1 x TM2 per k-tile
                            ci = tp.cast(ku % CIG, tp.i32)
                            tq = kt // (CIG // BK)
                            kd = tq // (TM1 * TM2) if TM0 > 1 else 0
                            kh = tq % (TM1 * TM2) // TM2 if TM1 > 1 else 0
                            kw = tq % TM2 if TM2 > 1 else 0
                        elif TAPMAJOR:                       # k = t * CIG + ci, t the tap of TM0 x TM1 x TM2
                            ci = tp.cast(ku % CIG, tp.i32)
                            tu = ku // CIG
                            kd = tp.cast(tu // (TM1 * TM2), tp.i32) if TM0 > 1 else 0
                            kh = tp.cast(tu % (TM1 * TM2) // TM2, tp.i32) if TM1 > 1 else 0
                            kw = tp.cast(tu % TM2, tp.i32) if TM2 > 1 else 0
                        else:
                            ci = tp.cast(ku // KVOL, tp.i32)
                            kd = tp.cast(ku % KVOL // (KS[1] * KS[2]), tp.i32) if KS[0] > 1 else 0
                            kh = tp.cast(ku % (KS[1] * KS[2]) // KS[2], tp.i32) if KS[1] > 1 else 0
                            kw = tp.cast(ku % KS[2], tp.i32)
                        tap_ok = ((kd < tk0) & (kh < tk1) & (kw < tk2)) if PHASED else True   # the phase has tap t
                        cd = kd * (-DI[0] if TRANSPOSED else DI[0])
                        ch = kh * (-DI[1] if TRANSPOSED else DI[1])
                        cw = kw * (-DI[2] if TRANSPOSED else DI[2])
                        if TRANSPOSED and not PHASED and (ST[0] > 1 or ST[1] > 1 or ST[2] > 1):
                            td = hd + cd                        # = id * S where the tap meets input row id
                            th = hh + ch
                            tw = hw + cw
                            x = tp.load(X[(((nb * CI + g * CIG + ci) * IS[0] + td // ST[0]) * IS[1] + th // ST[1])
                                          * IS[2] + tw // ST[2]],
                                        mask=(kk < KRED) & live & (td % ST[0] == 0) & (th % ST[1] == 0)
                                        & (tw % ST[2] == 0) & (tp.cast(td, tp.u32) < IS[0] * ST[0])
                                        & (tp.cast(th, tp.u32) < IS[1] * ST[1]) & (tp.cast(tw, tp.u32) < IS[2] * ST[2]),
                                        layout=LG)
                        else:
                            x = tp.load(X[prow + (((ci * IS[0] + cd) * IS[1] + ch) * IS[2] + cw)],
                                        mask=(kk < KRED) & live & tap_ok & (tp.cast(hw + cw, tp.u32) < IS[2])
                                        & ((tp.cast(hh + ch, tp.u32) < IS[1]) if IS[1] > 1 or KS[1] > 1 or PA[1] > 0
                                           else True)
                                        & ((tp.cast(hd + cd, tp.u32) < IS[0]) if IS[0] > 1 or KS[0] > 1 or PA[0] > 0
                                           else True), layout=LG)
                        hi = tp.round_tf32(x)
                        tp.store(a_hi[s], hi)
                        if SPLIT:
                            tp.store(a_lo[s], tp.round_tf32(x - hi))
                    tp.mbarrier_arrive(full[s])              # the gathered tile and the copies: stage s is full
    else:                               # consumers: wgmma on 64 rows each
        acc = tp.zeros((BM, BN), tp.f32, layout=LC)
        for j in range(rounds):
            for s in tp.static_range(STAGES):
                kt = j * STAGES + s
                if kt < k_tiles:
                    tp.mbarrier_wait(full[s], j)             # stage s holds tile kt
                    if TILE_TAPS:
                        tq = kt // (CIG // BK)
                        tile_ok = ((tq // (TM1 * TM2) < tk0) & (tq % (TM1 * TM2) // TM2 < tk1)
                                   & (tq % TM2 < tk2))
                    else:
                        tile_ok = True
                    if SPLIT:
                        if tile_ok:
                            part = tp.zeros((BM, BN), tp.f32, layout=LC)
                            part = tp.mma(a_lo[s], b_hi[s].T, part)
                            part = tp.mma(a_hi[s], b_lo[s].T, part)
                            part = tp.mma(a_hi[s], b_hi[s].T, part)
                            tp.mbarrier_arrive(empty[s])
                            acc = acc + part                 # round-to-nearest f32 adds across k-tiles
                        else:
                            tp.mbarrier_arrive(empty[s])
                    else:
                        if tile_ok:
                            acc = tp.mma(a_hi[s], b_hi[s].T, acc)
                        tp.mbarrier_arrive(empty[s])
        # epilogue: output element (pixel p, channel g * COG + c); a lowering may fuse a pointwise chain here
        p = m0 + tp.arange(BM)[:, None]
        c = n0 + tp.arange(BN)[None, :]
        if PHASED:          # row p is pixel j of the phase's grid: output pixel a + S j
            jd = p % PVOL // (PS1 * PS2)
            jh = p % (PS1 * PS2) // PS2
            jw = p % PS2
            keep = ((p < npix) & (c < cog) & (jd * ST[0] + a0 < OS[0]) & (jh * ST[1] + a1 < OS[1])
                    & (jw * ST[2] + a2 < OS[2]))
            op = ((jd * ST[0] + a0) * OS[1] + jh * ST[1] + a1) * OS[2] + jw * ST[2] + a2
        else:
            keep = (p < npix) & (c < cog)
            op = p % OVOL
        if ph < ST[0] * ST[1] * ST[2]:      # always (the grid's z is groups x phases)
            tp.store(Y[p // PVOL, g, c, op], acc, mask=keep)   # EPILOGUE


PRESETS = {
    # 128x128 tiles, 3 stages of a_hi, a_lo, b_hi, b_lo (16 KB each): 192 KB of shared memory
    "sm_90a": dict(BM=128, BN=128, BK=32, STAGES=3, CONSUMERS=2, INSTR=tp.nv.wgmma_m64n128k8_tf32),
}


def panel_layout(bm: int, bk: int):
    """A (bm, bk) tile over one warpgroup: lane l of warp w holds rows l, l + 32, ... (bm / 32 of them) and the
    bk / 4 columns [w bk / 4, (w + 1) bk / 4). A warp's load reads 32 neighbouring pixels of one tap, and each
    thread decomposes only a quarter of the tile's taps (the per-tap division work is per column)."""
    return tp.TVLayout((bm, bk), (32, 4), (bk // 4, bm // 32),
                       (((1, 0), (0, 32)), ((0, bk // 4), (1, 0))))


def policy(geometry: dict, cog: int, split: bool = False) -> dict:
    """The tile constexprs for a convolution (`geometry()`'s dict) with `cog` output channels per group.

    The producer's gather is latency-bound (ncu, H100, l2_007 64x32x128x128 3x3: 59% of the warps' cycles
    wait on L1TEX loads at 128 x 32 tiles, 148-162 registers x 384 threads, one block and 12 warps per SM), so
    the default is 64 x 16 tiles with one consumer warpgroup: 64 registers x 256 threads, four blocks (32 warps,
    four gathering warpgroups) per SM. 1-D convolutions gather two coordinates fewer per element and keep
    32-wide k-tiles (benchmarks/results/conv-sweep-*.json: conv1d k5 0.72x cuDNN at 64 x 32 against 0.34x at
    64 x 16; 3xTF32 1.22x at 128 x 32)."""
    one_d = geometry["IS"][0] == geometry["IS"][1] == 1 and geometry["KS"][0] == geometry["KS"][1] == 1
    if one_d:
        tiles = dict(BM=128, CONSUMERS=2) if split else dict(BM=64, CONSUMERS=1)
        tiles.update(BK=32, STAGES=3, SWIZZLE=tp.Swizzle(3, 2, 3))
    else:
        tiles = dict(BM=64, CONSUMERS=1, BK=16, STAGES=4, SWIZZLE=tp.Swizzle(2, 2, 3))
    return {**tiles, **tile_n(cog)}


def tile_n(cog: int) -> dict:
    """BN and the wgmma instruction for Cout/G output channels per group (the smallest tile >= cog, 32..128)."""
    bn = 32
    while bn < min(cog, 128):
        bn *= 2
    return dict(BN=bn, INSTR=getattr(tp.nv, f"wgmma_m64n{bn}k8_tf32"))


def geometry(x_shape, w_shape, y_shape, stride, padding, dilation, groups, transposed) -> dict:
    """The kernel's constexprs for a convolution (spatial tuples padded to 3-D at the front)."""
    nsp = len(x_shape) - 2

    def three(v, fill):
        v = list(v) if isinstance(v, (list, tuple)) else [v] * nsp
        v = v * nsp if len(v) == 1 else v
        return tuple([fill] * (3 - nsp) + [int(e) for e in v])

    cig = int(x_shape[1]) // groups
    st, di = three(stride, 1), three(dilation, 1)
    return dict(OS=three(y_shape[2:], 1), KS=three(w_shape[2:], 1), ST=st, PA=three(padding, 0),
                DI=di, CIG=cig, TRANSPOSED=bool(transposed),
                PHASED=bool(transposed) and max(st) > 1 and max(di) == 1, NB=int(x_shape[0]), CI=int(x_shape[1]),
                IS=three(x_shape[2:], 1))


def phases(geo: dict) -> int:
    """How many output phases (grid z = groups * phases) a geometry's kernel runs: S0 S1 S2 when PHASED."""
    return geo["ST"][0] * geo["ST"][1] * geo["ST"][2] if geo.get("PHASED") else 1


def phase_taps(geo: dict, a: tuple) -> list:
    """Per dim (k0, T): the first tap and the tap count of output phase `a` (tap t is k0 + S t)."""
    out = []
    for d in range(3):
        s, k = geo["ST"][d], geo["KS"][d]
        k0 = (a[d] + geo["PA"][d]) % s
        out.append((k0, len(range(k0, k, s))))
    return out


def weight_phased(w, groups: int, geo: dict):
    """The B operand of a PHASED transposed convolution: (phases * G, Cout/G, max taps * Cin/G), row ph * G + g
    holding phase ph's taps on the largest phase's tap grid TM0 x TM1 x TM2 (row-major; k = t * CIG + ci, each
    tap's Cin/G channels together), zeros where the phase has no tap; w is (Cin, Cout/G, *k) as torch keeps it
    (numpy or torch)."""
    import itertools

    torch_in = not isinstance(w, np.ndarray)
    wn = w.detach().cpu().numpy() if torch_in else w
    ci, cog = wn.shape[0], wn.shape[1]
    cig = ci // groups
    w5 = wn.reshape((groups, cig, cog) + tuple(geo["KS"]))          # spatial dims padded to 3 at the front
    tmax = [-(-k // s) for k, s in zip(geo["KS"], geo["ST"])]
    out = np.zeros((phases(geo), groups, cog) + tuple(tmax) + (cig,), wn.dtype)
    for ph, a in enumerate(itertools.product(*[range(s) for s in geo["ST"]])):
        taps = phase_taps(geo, a)
        if any(t == 0 for _, t in taps):
            continue
        sub = w5[:, :, :, taps[0][0]::geo["ST"][0], taps[1][0]::geo["ST"][1], taps[2][0]::geo["ST"][2]]
        t0, t1, t2 = sub.shape[3:]                                  # (G, CIG, COG, t0, t1, t2) -> (G, COG, t, CIG)
        out[ph, :, :, :t0, :t1, :t2, :] = sub.transpose(0, 2, 3, 4, 5, 1)
    out = out.reshape(phases(geo) * groups, cog, -1)
    if torch_in:
        import torch
        return torch.as_tensor(out, device=w.device)
    return out


def weight_gck(w, groups: int, transposed: bool):
    """The weight as the GEMM's B operand (G, Cout/G, Cin/G * kernel volume), K-major."""
    if not transposed:                      # (Cout, Cin/G, *k): already (G, Cout/G, K)
        return w.reshape(groups, w.shape[0] // groups, -1)
    ci, cog = w.shape[0], w.shape[1]         # (Cin, Cout/G, *k) -> (G, Cout/G, Cin/G, *k)
    wg = w.reshape(groups, ci // groups, cog, -1)
    wg = wg.transpose(0, 2, 1, 3) if isinstance(wg, np.ndarray) else wg.permute(0, 2, 1, 3)
    return wg.reshape(groups, cog, -1)


def weight_taps(wk, geo: dict):
    """B (G, Cout/G, Cin/G * kernel volume) reordered taps major (k = t * CIG + ci), for TAPS=True."""
    g, cog = wk.shape[0], wk.shape[1]
    w4 = wk.reshape(g, cog, geo["CIG"], -1)
    w4 = w4.transpose(0, 1, 3, 2) if isinstance(w4, np.ndarray) else w4.permute(0, 1, 3, 2)
    return w4.reshape(g, cog, -1)


def launch(x, w, y, stride=1, padding=0, dilation=1, groups=1, transposed=False, split=True,
           target: str = "sm_90a", **constexprs):
    """y = conv(x, w) (or conv_transpose), fp32 out; `split` picks 3xTF32 (fp32-accurate) or one TF32 pass."""
    from stdlib_kernels import gemm_fp32

    geo = geometry(x.shape, w.shape, y.shape, stride, padding, dilation, groups, transposed)
    geo.update({k: constexprs.pop(k) for k in ("PHASED", "TAPS") if k in constexprs})
    if geo["PHASED"]:
        wk = weight_phased(w, groups, geo)
    else:
        wk = weight_taps(weight_gck(w, groups, transposed), geo) if geo.get("TAPS") else weight_gck(w, groups,
                                                                                                  transposed)
    if not isinstance(wk, np.ndarray):
        wk = wk.contiguous()
    else:
        wk = np.ascontiguousarray(wk)
    wh, wl = gemm_fp32.split(wk, "nk")
    params = {**PRESETS["sm_90a"], **policy(geo, int(wk.shape[1]), bool(split)), **geo, "SPLIT": bool(split),
              **constexprs}
    cog = int(wk.shape[1])
    y4 = y.reshape(y.shape[0], groups, cog, -1)       # (N, G, Cout/G, output pixels): a view of y
    if (x.numel() if callable(getattr(x, "numel", None)) else x.size) >= 2**31:
        raise ValueError(f"conv_igemm indexes the input with 32-bit offsets: {tuple(x.shape)} is too large")
    return conv_igemm[grid(x.shape[0], params, cog, groups)](x.reshape(-1), wh, wl if split else wh, y4,
                                                             target=target, **params)


def grid(batch: int, params: dict, cog: int, groups: int) -> tuple:
    """(pixel tiles, channel tiles, groups x phases): a PHASED kernel's rows are the largest phase's pixels."""
    sizes = params["OS"]
    if params.get("PHASED"):
        sizes = [-(-o // s) for o, s in zip(params["OS"], params["ST"])]
    npix = batch * sizes[0] * sizes[1] * sizes[2]
    return (tp.cdiv(npix, params["BM"]), tp.cdiv(cog, params["BN"]), groups * phases(params))


def reference(x, w, stride=1, padding=0, dilation=1, groups=1, transposed=False, output_padding=0):
    """torch's convolution in float64."""
    import torch

    x = torch.as_tensor(np.asarray(x, np.float64))
    w = torch.as_tensor(np.asarray(w, np.float64))
    nsp = x.dim() - 2
    if transposed:
        fn = (torch.nn.functional.conv_transpose1d, torch.nn.functional.conv_transpose2d,
              torch.nn.functional.conv_transpose3d)[nsp - 1]
        return fn(x, w, stride=stride, padding=padding, output_padding=output_padding, groups=groups,
                  dilation=dilation).numpy()
    fn = (torch.nn.functional.conv1d, torch.nn.functional.conv2d, torch.nn.functional.conv3d)[nsp - 1]
    return fn(x, w, stride=stride, padding=padding, dilation=dilation, groups=groups).numpy()


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 6, 9, 11)).astype(np.float32)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    ref = reference(x, w, 2, 1, 1, 2)
    y = np.full(ref.shape, np.nan, np.float32)
    launch(x, w, y, 2, 1, 1, 2, STAGES=2)
    print("rel err =", float(np.linalg.norm(y - ref) / np.linalg.norm(ref)))
