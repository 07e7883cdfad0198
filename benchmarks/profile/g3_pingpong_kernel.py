"""The ping-pong GEMM of benchmarks/profile/g3_pingpong.py (an experiment that did not pay; see its docstring)."""

import tilepy as tp
from stdlib_kernels.gemm_hopper import b_layout


@tp.kernel(threads=384, target="sm_90a")
def gemm_pingpong(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"], C: tp.Tensor[tp.f32, "M", "N"],
                  BM: tp.constexpr = 128, BN: tp.constexpr = 128, BK: tp.constexpr = 64, STAGES: tp.constexpr = 5,
                  INSTR: tp.constexpr = tp.nv.wgmma_m64n128k16_bf16, SWIZZLE: tp.constexpr = tp.Swizzle(3, 3, 3),
                  PRODUCER_REGS: tp.constexpr = 0, CONSUMER_REGS: tp.constexpr = 0, GROUP_M: tp.constexpr = 8,
                  IN_FLIGHT: tp.constexpr = 1):
    a_s = tp.shared((BM, BK), tp.bf16, stages=STAGES, swizzle=SWIZZLE)
    b_s = tp.shared((BK, BN), tp.bf16, stages=STAGES, swizzle=SWIZZLE, layout=b_layout(BK, BN, min(64, BN)))
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    # the consumers' mainloops take turns (each waits the other's previous mainloop): a consumer waiting far ahead on
    # a ring stage would see a later phase of the same parity complete
    turn0 = tp.mbarrier(1)
    turn1 = tp.mbarrier(1)
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda k, j: ("B", k, j))
    n_m = tp.cdiv(C.shape[0], BM)
    n_n = tp.cdiv(C.shape[1], BN)
    in_group = GROUP_M * n_n
    k_tiles = tp.cdiv(A.shape[1], BK)
    first = tp.block_id(0)
    step = tp.num_blocks(0)
    my_tiles = tp.cdiv(n_m * n_n - first, step)
    if tp.warpgroup_id() == 0:
        if PRODUCER_REGS > 0:
            tp.setmaxnreg(PRODUCER_REGS)
        for i in range(my_tiles):
            t = first + i * step
            first_m = (t // in_group) * GROUP_M
            group_m = tp.minimum(n_m - first_m, GROUP_M)
            m0 = (first_m + (t % in_group) % group_m) * BM
            n0 = ((t % in_group) // group_m) * BN
            for k in range(k_tiles):
                g = i * k_tiles + k
                tp.mbarrier_wait(empty[g % STAGES], g // STAGES)
                tp.copy_bulk(A[m0:m0 + BM, k * BK:k * BK + BK], a_s[g % STAGES], full[g % STAGES])
                tp.copy_bulk(B[k * BK:k * BK + BK, n0:n0 + BN], b_s[g % STAGES], full[g % STAGES])
                tp.mbarrier_arrive(full[g % STAGES])
    else:
        if CONSUMER_REGS > 0:
            tp.setmaxnreg(CONSUMER_REGS)
        if tp.warpgroup_id() == 1:      # consumer 0: the block's even tiles
            for s in tp.static_range(STAGES):
                tp.mbarrier_arrive(empty[s])
            for i in range(0, my_tiles, 2):
                tp.mbarrier_wait(turn0, i // 2)            # consumer 1 finished tile i - 1's mainloop
                t = first + i * step
                first_m = (t // in_group) * GROUP_M
                group_m = tp.minimum(n_m - first_m, GROUP_M)
                m0 = (first_m + (t % in_group) % group_m) * BM
                n0 = ((t % in_group) // group_m) * BN
                acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN)))
                if IN_FLIGHT:
                    for k in range(k_tiles):
                        g = i * k_tiles + k
                        tp.mbarrier_wait(full[g % STAGES], g // STAGES)
                        acc = tp.mma_async(a_s[g % STAGES], b_s[g % STAGES], acc)
                        tp.mma_wait(1)
                        if k > 0:
                            tp.mbarrier_arrive(empty[(g + STAGES - 1) % STAGES])   # slot g - 1's group retired
                    tp.mbarrier_arrive(turn1)
                    tp.mma_wait(0)
                    tp.mbarrier_arrive(empty[(i * k_tiles + k_tiles - 1) % STAGES])
                else:
                    for k in range(k_tiles):
                        g = i * k_tiles + k
                        tp.mbarrier_wait(full[g % STAGES], g // STAGES)
                        acc = tp.mma(a_s[g % STAGES], b_s[g % STAGES], acc)
                        tp.mbarrier_arrive(empty[g % STAGES])
                    tp.mbarrier_arrive(turn1)
                tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
                tp.store(C[m0:m0 + BM, n0:n0 + BN], acc)
        else:                           # consumer 1: the odd tiles
            tp.mbarrier_arrive(turn0)
            for i in range(1, my_tiles, 2):
                tp.mbarrier_wait(turn1, i // 2)            # consumer 0 finished tile i - 1's mainloop
                t = first + i * step
                first_m = (t // in_group) * GROUP_M
                group_m = tp.minimum(n_m - first_m, GROUP_M)
                m0 = (first_m + (t % in_group) % group_m) * BM
                n0 = ((t % in_group) // group_m) * BN
                acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN)))
                if IN_FLIGHT:
                    for k in range(k_tiles):
                        g = i * k_tiles + k
                        tp.mbarrier_wait(full[g % STAGES], g // STAGES)
                        acc = tp.mma_async(a_s[g % STAGES], b_s[g % STAGES], acc)
                        tp.mma_wait(1)
                        if k > 0:
                            tp.mbarrier_arrive(empty[(g + STAGES - 1) % STAGES])   # slot g - 1's group retired
                    tp.mbarrier_arrive(turn0)
                    tp.mma_wait(0)
                    tp.mbarrier_arrive(empty[(i * k_tiles + k_tiles - 1) % STAGES])
                else:
                    for k in range(k_tiles):
                        g = i * k_tiles + k
                        tp.mbarrier_wait(full[g % STAGES], g // STAGES)
                        acc = tp.mma(a_s[g % STAGES], b_s[g % STAGES], acc)
                        tp.mbarrier_arrive(empty[g % STAGES])
                    tp.mbarrier_arrive(turn0)
                tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
                tp.store(C[m0:m0 + BM, n0:n0 + BN], acc)


gemm_pingpong_bf16 = gemm_pingpong.retyped(C=tp.Tensor[tp.bf16, "M", "N"])
