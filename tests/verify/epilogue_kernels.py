"""A persistent warp-specialized GEMM whose TMA-store epilogue overlaps the next output tile (G7's withdrawn
gemm_persistent EPILOGUE=2, benchmarks/NOTES.md): the consumers write a tile's accumulator into one shared tile
c_s, arrive on `staged` and go on to the next tile's ring; the producer, after issuing the next tile's copies,
waits for `staged`, stores c_s with a bulk tensor store, waits for that store's read and arrives on `c_free`,
which the consumers wait for before writing the next tile into c_s. Tile it's handshake is phase it of both
mbarriers: arrivals made once per tile, after the tile's ring, against phases of the tile index.

BUG (the correct kernel with BUG == "none"):
* "staged_phase": the producer waits for phase it of `staged` (one tile late: the consumers' tile it + 1, which
  they write only after c_free's phase it, which the producer arrives on after that wait): a deadlock,
* "free_early": the consumers wait for phase it - 2 of `c_free` (one tile early): they overwrite c_s while the
  producer's store of the previous tile may still read it (a race on c_s),
* "no_free_wait": the consumers never wait for `c_free` (a race on c_s),
* "last_phase": the producer's store of the block's last tile waits for phase mine - 2 of `staged`: it may
  store c_s before the consumers wrote the last tile into it (a race on c_s).
SOFF / FOFF shift every phase the producer waits for on `staged` / the consumers wait for on `c_free`.
"""

import tilepy as tp
from stdlib_kernels.gemm_hopper import b_layout


@tp.kernel(threads=lambda c: 128 * (1 + c["CONSUMERS"]), target="sm_90a")
def ring(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"], C: tp.Tensor[tp.f32, "M", "N"],
         BM: tp.constexpr = 64, BN: tp.constexpr = 64, BK: tp.constexpr = 64, STAGES: tp.constexpr = 2,
         CONSUMERS: tp.constexpr = 1, INSTR: tp.constexpr = tp.nv.wgmma_m64n64k16_bf16,
         SWIZZLE: tp.constexpr = tp.Swizzle(3, 3, 3), GROUP_M: tp.constexpr = 2, BUG: tp.constexpr = "none",
         SOFF: tp.constexpr = 0, FOFF: tp.constexpr = 0):
    a_s = tp.shared((BM, BK), tp.bf16, stages=STAGES, swizzle=SWIZZLE)
    b_s = tp.shared((BK, BN), tp.bf16, stages=STAGES, swizzle=SWIZZLE, layout=b_layout(BK, BN))
    c_s = tp.shared((BM, BN), C.dtype, swizzle=tp.Swizzle(3, 4 - C.dtype.bytes // 2, 3),
                    layout=b_layout(BM, BN, 128 // C.dtype.bytes))
    staged = tp.mbarrier(1)     # the consumers' tile it is in c_s (phase it)
    c_free = tp.mbarrier(1)     # the store of tile it has read c_s (phase it)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda k, j: ("B", k, j))
    n_m = tp.cdiv(C.shape[0], BM)
    n_n = tp.cdiv(C.shape[1], BN)
    in_group = GROUP_M * n_n
    k_tiles = tp.cdiv(A.shape[1], BK)
    rounds = tp.cdiv(k_tiles, STAGES)
    first = tp.block_id(0)
    step = tp.num_blocks(0)
    if tp.warpgroup_id() == 0:
        for t in range(first, n_m * n_n, step):
            first_m = (t // in_group) * GROUP_M
            group_m = tp.minimum(n_m - first_m, GROUP_M)
            m0 = (first_m + (t % in_group) % group_m) * BM
            n0 = ((t % in_group) // group_m) * BN
            turn = ((t - first) // step) * rounds
            for k in range(rounds * STAGES):
                tp.mbarrier_wait(empty[k % STAGES], turn + k // STAGES)
                if k < k_tiles:
                    tp.copy_bulk(A[m0:m0 + BM, k * BK:k * BK + BK], a_s[k % STAGES], full[k % STAGES])
                    tp.copy_bulk(B[k * BK:k * BK + BK, n0:n0 + BN], b_s[k % STAGES], full[k % STAGES])
                tp.mbarrier_arrive(full[k % STAGES])
            it = (t - first) // step
            if it > 0:                  # the previous tile, staged while this tile's ring filled
                pt = t - step
                p_first_m = (pt // in_group) * GROUP_M
                p_group_m = tp.minimum(n_m - p_first_m, GROUP_M)
                pm0 = (p_first_m + (pt % in_group) % p_group_m) * BM
                pn0 = ((pt % in_group) // p_group_m) * BN
                if BUG == "staged_phase":
                    tp.mbarrier_wait(staged, it)
                else:
                    tp.mbarrier_wait(staged, it - 1 + SOFF)
                tp.store_bulk(c_s, C[pm0:pm0 + BM, pn0:pn0 + BN])
                tp.store_bulk_wait(c_s)
                tp.mbarrier_arrive(c_free)
        mine = tp.cdiv(n_m * n_n - first, step)
        lt = first + (mine - 1) * step
        l_first_m = (lt // in_group) * GROUP_M
        l_group_m = tp.minimum(n_m - l_first_m, GROUP_M)
        lm0 = (l_first_m + (lt % in_group) % l_group_m) * BM
        ln0 = ((lt % in_group) // l_group_m) * BN
        if BUG == "last_phase":
            tp.mbarrier_wait(staged, mine - 2)
        else:
            tp.mbarrier_wait(staged, mine - 1 + SOFF)
        tp.store_bulk(c_s, C[lm0:lm0 + BM, ln0:ln0 + BN])
        tp.store_bulk_wait(c_s)
    else:
        for s in tp.static_range(STAGES):
            tp.mbarrier_arrive(empty[s])
        for t in range(first, n_m * n_n, step):
            first_m = (t // in_group) * GROUP_M
            group_m = tp.minimum(n_m - first_m, GROUP_M)
            m0 = (first_m + (t % in_group) % group_m) * BM
            n0 = ((t % in_group) // group_m) * BN
            turn = ((t - first) // step) * rounds
            acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1)))
            for k in range(rounds * STAGES):
                tp.mbarrier_wait(full[k % STAGES], turn + k // STAGES)
                if k < k_tiles:
                    acc = tp.mma(a_s[k % STAGES], b_s[k % STAGES], acc)
                tp.mbarrier_arrive(empty[k % STAGES])
            tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
            it = (t - first) // step
            if BUG == "free_early":
                if it > 1:
                    tp.mbarrier_wait(c_free, it - 2)
            elif BUG != "no_free_wait":
                if it > 0:
                    tp.mbarrier_wait(c_free, it - 1 + FOFF)    # the previous tile's store has read c_s
            tp.store(c_s, acc)
            tp.mbarrier_arrive(staged)
