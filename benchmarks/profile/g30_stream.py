"""G30: the floor of the skinny fp8 GEMM's stream. `stream_b` moves B (N, K) e4m3 through the same TMA ring as
gemm_fp8_swap's producer (boxes of BN rows x BK bytes, STAGES deep, K split over grid z as the cluster's ranks split
it) with no wgmma: a consumer warpgroup only waits on each stage and releases it. Its time is what the copies alone
cost (launch, ramp, DRAM), so ours minus it is the MMA chain, the exchange and the store. Variants change the box
(128-byte swizzled rows as the wgmma reads them, or 256-byte rows unswizzled: twice the bytes of a row per request)
and the split. Imported by g30_trace.py; not a stdlib kernel."""

import tilepy as tp


@tp.kernel(threads=256, target="sm_90a")
def stream_b(B: tp.Tensor[tp.e4m3, "N", "K"], O: tp.Tensor[tp.f32, "R", "C"], BN: tp.constexpr = 64,
             BK: tp.constexpr = 128, STAGES: tp.constexpr = 12, SPLIT: tp.constexpr = 2,
             WIDE: tp.constexpr = 0, TMA_ONLY: tp.constexpr = 0):
    n0 = tp.block_id(1) * BN
    if WIDE:        # unswizzled rows (BK up to 256 bytes a row)
        b_s = tp.shared((BN, BK), tp.e4m3, stages=STAGES)
    else:           # 128-byte rows under the 128-byte swizzle (what the wgmma reads)
        b_s = tp.shared((BN, BK), tp.e4m3, stages=STAGES, swizzle=tp.Swizzle(3, 4, 3))
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    k_tiles = tp.cdiv(tp.cdiv(B.shape[1], BK), SPLIT)
    k_first = tp.block_id(2) * k_tiles
    if tp.warpgroup_id() == 0:
        for k in range(k_tiles):
            tp.mbarrier_wait(empty[k % STAGES], k // STAGES)
            k0 = (k_first + k) * BK
            tp.copy_bulk(B[n0:n0 + BN, k0:k0 + BK], b_s[k % STAGES], full[k % STAGES], fallback=TMA_ONLY == 0)
            tp.mbarrier_arrive(full[k % STAGES])
    else:
        for s in tp.static_range(STAGES):
            tp.mbarrier_arrive(empty[s])
        for k in range(k_tiles):
            tp.mbarrier_wait(full[k % STAGES], k // STAGES)
            tp.mbarrier_arrive(empty[k % STAGES])
        row = tp.block_id(2) * tp.num_blocks(1) + tp.block_id(1)
        tp.store(O[row:row + 1, 0:128], tp.zeros((1, 128), tp.f32))
