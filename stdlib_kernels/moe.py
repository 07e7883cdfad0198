"""A mixture-of-experts layer (bf16, f32 accumulation) in five tilepy kernels:

1. `moe_route`: per token, the top-k of the router logits (first index on ties, as argmax), their weights
   softmax(logits)[topk] renormalized over the k (= a softmax over the k selected logits), and each
   assignment's rank inside its expert: an `atomic_add` on the expert's counter returns the old count.
2. `moe_permute`: copies each token's row to its k slots of the expert-major buffer XS (E, C, H): slot
   (e, rank) holds the token, so expert e's tokens are rows 0..count_e - 1 of XS[e].
3. `moe_gemm13`: grouped gate/up GEMM with the SiLU-and-mul fused into the epilogue: block (m, n, e) multiplies
   XS[e, m-tile] by the gate columns and the up columns of W13[e] (H, 2F) into two accumulators and stores
   silu(gate) * up to HS[e] (E, C, F).
4. `moe_gemm2`: grouped down GEMM: YS[e] = HS[e] @ W2[e] (F, H).
5. `moe_combine`: out[t] = sum_s w[t, s] * YS[ids[t, s], rank[t, s]], in f32, stored once per token.

The grouped GEMMs are the warp-specialized structure of `gemm_hopper.py` (a TMA producer warpgroup filling a
ring of STAGES shared-memory stages, wgmma consumer warpgroups releasing them through `empty` mbarriers),
with the expert as the grid's third axis. The schedule is the grid: tile (m, n, e) covers rows m * BM.. of
expert e. Expert rows live at fixed places (XS[e, rank]), so every view offset is a uniform scalar from the
block ids, which is what a bulk tensor copy needs (a tile's expert cannot come from a loaded value: tilepy has
no data-dependent uniform scalars). The host reads the largest count once (one device-to-host copy, as a
per-expert loop must) and sizes the capacity C to it, rounded up to BM; the tiles of an expert past its own
count multiply rows nobody reads (the waste is reported by `plan`). An empty expert is just such tiles.
"""

import numpy as np

import tilepy as tp

# ---------------------------------------------------------------- routing


@tp.kernel(threads=128)
def moe_route(LOGITS: tp.Tensor[tp.f32, "T", "E"], IDS: tp.Tensor[tp.i32, "T", "K"], W: tp.Tensor[tp.f32, "T", "K"],
              RANK: tp.Tensor[tp.i32, "T", "K"], COUNTS: tp.Tensor[tp.i32, "E"], SRC: tp.Tensor[tp.i32, "E", "T"],
              TOPK: tp.constexpr = 2, BT: tp.constexpr = 16, BE: tp.constexpr = 8):
    """SRC (E, T), filled with -1 before: SRC[e, rank] = the token of that slot (the permutation's inverse).
    It is written with atomic_max: each (e, rank) is written once, but the verifier cannot know ranks are
    distinct (they come from the atomic counter), and an atomic is race-free by construction."""
    t0 = tp.block_id(0) * BT
    cols = tp.arange(BE)[None, :]
    rows = t0 + tp.arange(BT)
    live = rows < LOGITS.shape[0]
    x = tp.load(LOGITS[t0:t0 + BT, 0:BE], mask=cols < LOGITS.shape[1], other=float("-inf"))
    top = tp.max(x, axis=1, keepdims=True)
    pick = x
    total = tp.zeros((BT, 1), tp.f32)
    for _s in tp.static_range(TOPK):                   # the sum of the k largest exp(l - max)
        v = tp.max(pick, axis=1, keepdims=True)
        total += tp.exp(v - top)
        pick = tp.where(cols == tp.argmax(pick, axis=1, keepdims=True), float("-inf"), pick)
    pick = x
    for s in tp.static_range(TOPK):                    # again, storing: expert, weight, rank
        v = tp.max(pick, axis=1, keepdims=True)
        e = tp.argmax(pick, axis=1, keepdims=True)
        tp.store(W[t0:t0 + BT, s:s + 1], tp.exp(v - top) / total)
        tp.store(IDS[t0:t0 + BT, s:s + 1], e)
        rank = tp.atomic_add(COUNTS[e], 1, mask=live[:, None])
        tp.store(RANK[t0:t0 + BT, s:s + 1], rank)
        tp.atomic_max(SRC[e, rank], rows[:, None], mask=live[:, None])
        pick = tp.where(cols == e, float("-inf"), pick)


# ---------------------------------------------------------------- permutation and combine


@tp.kernel(threads=128)
def moe_permute(X: tp.Tensor[tp.bf16, "T", "H"], SRC: tp.Tensor[tp.i32, "E", "T"],
                XS: tp.Tensor[tp.bf16, "E", "C", "H"],
                BR: tp.constexpr = 8, BH: tp.constexpr = 512):
    """XS[e, r] = X[SRC[e, r]] (a gather: rows of slots nobody took, SRC = -1, are zeros); block (r-tile,
    h-tile, e) writes its own window of XS."""
    r0 = tp.block_id(0) * BR
    h0 = tp.block_id(1) * BH
    e = tp.block_id(2)
    src = tp.load(SRC[e, r0:r0 + BR], mask=(r0 + tp.arange(BR)) < XS.shape[1], other=-1)[:, None]
    x = tp.load(X[src, (h0 + tp.arange(BH))[None, :]], layout=tp.blocked((BR, BH), 128, vec=8))
    tp.store(XS[e, r0:r0 + BR, h0:h0 + BH], x)


@tp.kernel(threads=128)
def moe_combine(YS: tp.Tensor[tp.bf16, "E", "C", "H"], IDS: tp.Tensor[tp.i32, "T", "K"],
                RANK: tp.Tensor[tp.i32, "T", "K"], W: tp.Tensor[tp.f32, "T", "K"], OUT: tp.Tensor[tp.bf16, "T", "H"],
                BK: tp.constexpr = 2, BH: tp.constexpr = 1024):
    t = tp.block_id(0)
    h0 = tp.block_id(1) * BH
    e = tp.load(IDS[t, 0:BK], other=-1)[:, None]
    r = tp.load(RANK[t, 0:BK], other=-1)[:, None]
    w = tp.load(W[t, 0:BK])[:, None]                   # slots past K weigh 0
    y = tp.load(YS[e, r, (h0 + tp.arange(BH))[None, :]]).to(tp.f32)
    out = tp.sum(y * w, axis=0)
    tp.store(OUT[t, h0:h0 + BH], out)


# ---------------------------------------------------------------- grouped GEMMs (sm_90a)


def _threads(c):
    return 128 * (1 + c["CONSUMERS"])


def b_layout(BK, BN, atom=64):
    """(BK, BN) tile as BN // atom blocks of row-major (BK, atom): the wgmma MN-major form (as gemm_hopper)."""
    return tp.Layout((BK, (atom, BN // atom)), (atom, (1, atom * BK)))


@tp.kernel(threads=_threads, target="sm_90a")
def moe_gemm13(XS: tp.Tensor[tp.bf16, "E", "C", "H"], W13: tp.Tensor[tp.bf16, "E", "H", "F2"],
               HS: tp.Tensor[tp.bf16, "E", "C", "F"],
               BM: tp.constexpr = 128, BN: tp.constexpr = 128, BK: tp.constexpr = 64, STAGES: tp.constexpr = 4,
               CONSUMERS: tp.constexpr = 2, INSTR: tp.constexpr = tp.nv.wgmma_m64n128k16_bf16,
               SWIZZLE: tp.constexpr = tp.Swizzle(3, 3, 3), PRODUCER_REGS: tp.constexpr = 0,
               CONSUMER_REGS: tp.constexpr = 0, ROUND: tp.constexpr = False):
    """HS[e, m-tile, n-tile] = silu(XS[e] @ W13[e, :, n-tile]) * (XS[e] @ W13[e, :, F + n-tile]).

    ROUND: the gate and up products and silu(gate) are each rounded to bf16 first, where a bf16 PyTorch program
    (the batched products, F.silu, their product) stores them: the lowering matches eager's roundings.

    Stage k % STAGES holds tile k of A and of the gate and up columns of B; its round k // STAGES is the phase
    of `full` and `empty`. The gate product is issued as an asynchronous wgmma group and the up product right
    behind it, so one wait covers both (the verifier follows one mma_async per iteration, so a group cannot
    also stay in flight across k-tiles here, as in gemm_hopper's IN_FLIGHT)."""
    m0 = tp.block_id(0) * BM
    n0 = tp.block_id(1) * BN
    e = tp.block_id(2)
    f = HS.shape[2]
    a_s = tp.shared((BM, BK), tp.bf16, stages=STAGES, swizzle=SWIZZLE)
    g_s = tp.shared((BK, BN), tp.bf16, stages=STAGES, swizzle=SWIZZLE, layout=b_layout(BK, BN))
    u_s = tp.shared((BK, BN), tp.bf16, stages=STAGES, swizzle=SWIZZLE, layout=b_layout(BK, BN))
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    tp.tag(XS, lambda x, i, k: ("A", x, i, k))
    tp.tag(W13, lambda x, k, j: ("B", x, k, j))
    k_tiles = tp.cdiv(XS.shape[2], BK)
    if tp.warpgroup_id() == 0:          # producer: one thread issues the bulk tensor copies
        if PRODUCER_REGS > 0:
            tp.setmaxnreg(PRODUCER_REGS)
        for k in range(k_tiles):
            if k >= STAGES:
                tp.mbarrier_wait(empty[k % STAGES], k // STAGES - 1)       # tile k - STAGES was released
            k0 = k * BK
            tp.copy_bulk(XS[e, m0:m0 + BM, k0:k0 + BK], a_s[k % STAGES], full[k % STAGES])
            tp.copy_bulk(W13[e, k0:k0 + BK, n0:n0 + BN], g_s[k % STAGES], full[k % STAGES])
            tp.copy_bulk(W13[e, k0:k0 + BK, f + n0:f + n0 + BN], u_s[k % STAGES], full[k % STAGES])
            tp.mbarrier_arrive(full[k % STAGES])
    else:                               # consumers: gate and up accumulators over the same A stage
        if CONSUMER_REGS > 0:
            tp.setmaxnreg(CONSUMER_REGS)
        gate = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1)))
        up = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1)))
        for k in range(k_tiles):
            tp.mbarrier_wait(full[k % STAGES], k // STAGES)
            gate = tp.mma_async(a_s[k % STAGES], g_s[k % STAGES], gate)   # both products issued back to back,
            up = tp.mma(a_s[k % STAGES], u_s[k % STAGES], up)              # one wait retires both
            tp.mma_wait(0)
            tp.mbarrier_arrive(empty[k % STAGES])
        # one expert, and the contraction index agrees, in both products
        tp.assert_tag(tp.mma_operands(gate), lambda a, b: a[1] == b[1] and a[3] == b[2])
        tp.assert_tag(tp.mma_operands(up), lambda a, b: a[1] == b[1] and a[3] == b[2])
        if ROUND:
            g = gate.to(tp.bf16).to(tp.f32)
            tp.store(HS[e, m0:m0 + BM, n0:n0 + BN], tp.silu(g).to(tp.bf16).to(tp.f32) * up.to(tp.bf16).to(tp.f32))
        else:
            tp.store(HS[e, m0:m0 + BM, n0:n0 + BN], tp.silu(gate) * up)


@tp.kernel(threads=_threads, target="sm_90a")
def moe_gemm2(HS: tp.Tensor[tp.bf16, "E", "C", "F"], W2: tp.Tensor[tp.bf16, "E", "F", "H"],
              YS: tp.Tensor[tp.bf16, "E", "C", "H"],
              BM: tp.constexpr = 128, BN: tp.constexpr = 256, BK: tp.constexpr = 64, STAGES: tp.constexpr = 4,
              CONSUMERS: tp.constexpr = 2, INSTR: tp.constexpr = tp.nv.wgmma_m64n256k16_bf16,
              SWIZZLE: tp.constexpr = tp.Swizzle(3, 3, 3), IN_FLIGHT: tp.constexpr = 0,
              PRODUCER_REGS: tp.constexpr = 0, CONSUMER_REGS: tp.constexpr = 0):
    """YS[e, m-tile, n-tile] = HS[e, m-tile] @ W2[e, :, n-tile] (f32 accumulation, bf16 out); gemm_hopper's
    ring: with IN_FLIGHT, tile k's wgmma group is issued, `mma_wait(1)` retires tile k - 1's, and only then is
    tile k - 1's stage released (every stage but the last is released up front)."""
    m0 = tp.block_id(0) * BM
    n0 = tp.block_id(1) * BN
    e = tp.block_id(2)
    a_s = tp.shared((BM, BK), tp.bf16, stages=STAGES, swizzle=SWIZZLE)
    b_s = tp.shared((BK, BN), tp.bf16, stages=STAGES, swizzle=SWIZZLE, layout=b_layout(BK, BN))
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    tp.tag(HS, lambda x, i, k: ("A", x, i, k))
    tp.tag(W2, lambda x, k, j: ("B", x, k, j))
    k_tiles = tp.cdiv(HS.shape[2], BK)
    if tp.warpgroup_id() == 0:
        if PRODUCER_REGS > 0:
            tp.setmaxnreg(PRODUCER_REGS)
        for k in range(k_tiles):
            if IN_FLIGHT == 0:
                if k >= STAGES:
                    tp.mbarrier_wait(empty[k % STAGES], k // STAGES - 1)
            else:
                tp.mbarrier_wait(empty[k % STAGES], k // STAGES)
            k0 = k * BK
            tp.copy_bulk(HS[e, m0:m0 + BM, k0:k0 + BK], a_s[k % STAGES], full[k % STAGES])
            tp.copy_bulk(W2[e, k0:k0 + BK, n0:n0 + BN], b_s[k % STAGES], full[k % STAGES])
            tp.mbarrier_arrive(full[k % STAGES])
    else:
        if CONSUMER_REGS > 0:
            tp.setmaxnreg(CONSUMER_REGS)
        acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1)))
        if IN_FLIGHT == 0:
            for k in range(k_tiles):
                tp.mbarrier_wait(full[k % STAGES], k // STAGES)
                acc = tp.mma(a_s[k % STAGES], b_s[k % STAGES], acc)
                tp.mbarrier_arrive(empty[k % STAGES])
        else:
            for s in tp.static_range(STAGES - 1):
                tp.mbarrier_arrive(empty[s])
            for k in range(k_tiles):
                tp.mbarrier_wait(full[k % STAGES], k // STAGES)
                acc = tp.mma_async(a_s[k % STAGES], b_s[k % STAGES], acc)
                tp.mma_wait(1)
                tp.mbarrier_arrive(empty[(k + STAGES - 1) % STAGES])
            tp.mma_wait(0)
        tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[1] == b[1] and a[3] == b[2])
        tp.store(YS[e, m0:m0 + BM, n0:n0 + BN], acc)


# H100 tiles: gate/up 128x128 (two accumulators: a 128x256 tile's MMA work per k-tile), down 128x256; 4 stages,
# 2 consumer warpgroups. Read off the SASS with NVRTC 13.0 (not yet timed on the GPU): gemm13 issues its 4 + 4
# HGMMA of a k-tile back to back under one wait, 155 registers, no local memory; gemm2 with IN_FLIGHT=1 gets
# ptxas's C7514 ("wgmma serialized: non-wgmma instructions read the accumulators"), a wait after every HGMMA, so
# the preset keeps IN_FLIGHT=0 (4 HGMMA, one wait). setmaxnreg (PRODUCER_REGS=40, CONSUMER_REGS=232) makes
# ptxas spill (its allocation stays at the 168-register cap of 384 threads), so it is off.
PRESETS = {
    "gemm13": dict(BM=128, BN=128, BK=64, STAGES=4, CONSUMERS=2, INSTR=tp.nv.wgmma_m64n128k16_bf16),
    "gemm2": dict(BM=128, BN=256, BK=64, STAGES=4, CONSUMERS=2, INSTR=tp.nv.wgmma_m64n256k16_bf16, IN_FLIGHT=0),
}
# few rows per expert (decode, fine-grained at small T): 64-row tiles, one consumer warpgroup, so the A tiles and
# the MMA work on empty rows halve; `moe` picks them when no expert has more than 64 rows
SMALL_M = {
    "gemm13": dict(BM=64, BN=128, BK=64, STAGES=4, CONSUMERS=1, INSTR=tp.nv.wgmma_m64n128k16_bf16),
    "gemm2": dict(BM=64, BN=256, BK=64, STAGES=4, CONSUMERS=1, INSTR=tp.nv.wgmma_m64n256k16_bf16, IN_FLIGHT=0),
}
# small tiles for the CPU interpreter's tests
TINY = {
    "gemm13": dict(BM=64, BN=64, BK=64, STAGES=2, CONSUMERS=1, INSTR=tp.nv.wgmma_m64n64k16_bf16),
    "gemm2": dict(BM=64, BN=64, BK=64, STAGES=2, CONSUMERS=1, INSTR=tp.nv.wgmma_m64n64k16_bf16),
}


# ---------------------------------------------------------------- the layer


def _pow2(n, lo=1):
    return max(lo, 1 << (int(n) - 1).bit_length())


def _lib(x):
    import torch

    return torch if isinstance(x, torch.Tensor) else np


def route(logits, topk, **kw):
    """(ids (T, k) i32, weights (T, k) f32, rank (T, k) i32, counts (E,) i32, src (E, T) i32)."""
    import torch

    t, e = logits.shape
    dev = logits.device if isinstance(logits, torch.Tensor) else None
    mk = (lambda *s, dt: torch.empty(*s, dtype=dt, device=dev)) if dev is not None else (
        lambda *s, dt: torch.empty(*s, dtype=dt))
    ids, w, rank = mk(t, topk, dt=torch.int32), mk(t, topk, dt=torch.float32), mk(t, topk, dt=torch.int32)
    counts = torch.zeros(e, dtype=torch.int32, device=dev)
    src = torch.full((e, t), -1, dtype=torch.int32, device=dev)
    bt = 16
    moe_route[(tp.cdiv(t, bt),)](logits, ids, w, rank, counts, src, TOPK=topk, BT=bt, BE=_pow2(e, 2), **kw)
    return ids, w, rank, counts, src


def plan(counts, bm):
    """Capacity C (the largest count rounded up to BM, at least BM) and the share of GEMM rows that are waste."""
    counts = np.asarray(counts.cpu() if hasattr(counts, "cpu") else counts, np.int64)
    cap = max(bm, -(-int(counts.max()) // bm) * bm)
    used = int(counts.sum())
    return cap, 1.0 - used / (cap * len(counts)) if len(counts) else 0.0


def moe(x, logits, w13, w2, topk, presets=None, return_parts=False, **kw):
    """The MoE layer: x (T, H) bf16, router logits (T, E) f32, w13 (E, H, 2F) (gate columns, then up columns),
    w2 (E, F, H); returns (T, H) bf16. Runs on the GPU for CUDA tensors, on the interpreter for CPU tensors
    (then pass presets=TINY). Without `presets`, SMALL_M where no expert has more than 64 rows, else PRESETS.
    At T <= the tile's rows the capacity is that tile and the routing's counts are not read back (no sync)."""
    import torch

    t, h = x.shape
    e, _, f2 = w13.shape
    f = f2 // 2
    if tuple(w2.shape) != (e, f, h) or tuple(logits.shape) != (t, e) or w13.shape[1] != h:
        raise ValueError(f"moe: shapes x {tuple(x.shape)}, logits {tuple(logits.shape)}, w13 {tuple(w13.shape)}, "
                         f"w2 {tuple(w2.shape)} do not fit (T, H), (T, E), (E, H, 2F), (E, F, H)")
    ids, wts, rank, counts, src = route(logits, topk, **kw)
    # An expert holds at most T rows (a token picks it at most once), so at T <= 64 the capacity is one 64-row
    # tile and the counts are not read: no device-to-host wait, the launches queue behind the routing.
    counts_host = None
    if presets is None:
        if t <= SMALL_M["gemm13"]["BM"]:
            presets = SMALL_M
        else:
            counts_host = counts.cpu()                     # the one device-to-host read
            presets = SMALL_M if int(counts_host.max()) <= SMALL_M["gemm13"]["BM"] else PRESETS
    bm = max(presets["gemm13"]["BM"], presets["gemm2"]["BM"])
    if t <= bm and counts_host is None:
        cap, waste = bm, None                              # (waste: from the counts, with return_parts)
    else:
        counts_host = counts.cpu() if counts_host is None else counts_host
        cap, waste = plan(counts_host, bm)
    dev = x.device
    xs = torch.empty(e, cap, h, dtype=x.dtype, device=dev)
    bk = _pow2(topk, 2)
    bh = min(1024, _pow2(h, 16))
    bhp = min(512, _pow2(h, 16))
    moe_permute[(cap // 8, tp.cdiv(h, bhp), e)](x, src, xs, BR=8, BH=bhp, **kw)
    hs = torch.empty(e, cap, f, dtype=x.dtype, device=dev)
    p13, p2 = presets["gemm13"], presets["gemm2"]
    moe_gemm13[(cap // p13["BM"], tp.cdiv(f, p13["BN"]), e)](xs, w13, hs, **p13, **kw)
    ys = torch.empty(e, cap, h, dtype=x.dtype, device=dev)
    moe_gemm2[(cap // p2["BM"], tp.cdiv(h, p2["BN"]), e)](hs, w2, ys, **p2, **kw)
    out = torch.empty(t, h, dtype=x.dtype, device=dev)
    moe_combine[(t, tp.cdiv(h, bh))](ys, ids, rank, wts, out, BK=bk, BH=bh, **kw)
    if return_parts:
        if waste is None:
            cap_, waste = plan(counts.cpu(), bm)
            assert cap_ == cap
        return out, dict(ids=ids, weights=wts, rank=rank, counts=counts, capacity=cap, waste=waste, xs=xs, hs=hs,
                         ys=ys, presets=presets)
    return out


def reference(x, logits, w13, w2, topk, round_to=None, round_products=False):
    """float64 MoE: softmax, top-k (torch.topk), renormalize, per-expert SiLU-gated MLP, weighted sum.
    `round_to` (e.g. torch.bfloat16) rounds the two intermediates the kernels store (silu(gate) * up, and each
    expert's output) to that dtype, so the comparison isolates the kernels' own arithmetic; `round_products`
    also rounds the gate and up products and silu(gate) (what `moe_gemm13` does with ROUND)."""
    import torch

    def rnd(a):
        return a if round_to is None else a.to(round_to).double()

    x, logits = x.detach().double(), logits.detach().double()     # on their device; weights per expert below
    p = torch.softmax(logits, dim=1)
    wv, ids = torch.topk(p, topk, dim=1)
    wv = wv / wv.sum(dim=1, keepdim=True)
    f = w2.shape[1]
    out = torch.zeros_like(x)
    for e in range(w13.shape[0]):
        tok, slot = torch.nonzero(ids == e, as_tuple=True)
        if tok.numel() == 0:
            continue
        hh = x[tok] @ w13[e].double()
        if round_products:
            hh = rnd(hh)
            y = rnd(rnd(rnd(torch.nn.functional.silu(hh[:, :f])) * hh[:, f:]) @ w2[e].double())
        else:
            y = rnd(rnd(torch.nn.functional.silu(hh[:, :f]) * hh[:, f:]) @ w2[e].double())
        out.index_add_(0, tok, y * wv[tok, slot][:, None])
    return out, ids, wv
