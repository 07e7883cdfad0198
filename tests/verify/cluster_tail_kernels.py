"""tests/verify/cluster_kernels.py's 2x1-cluster GEMM with the relaxed cluster barriers of gemm_cluster RELAXED=1: a
relaxed opening barrier (it publishes the mbarrier initializations: tp.mbarrier's init is fenced at cluster scope)
and, instead of the closing barrier, the producer's tail: after its ring it waits on `empty` for one more phase of
every stage, so every block's last releases (remote arrivals) have reached its block before it exits; its consumers
waited on `full` for every multicast into it. tests/verify/test_cluster_tail.py.

BUG "short": the tail covers STAGES - 1 stages (the last release of one stage is not waited for: a block may exit
       while the other still arrives on it).
BUG "early": the tail waits one phase early (the last round of releases is not waited for).
BUG "notail": no tail and no closing barrier.
BUG "extra": the consumers release stage 0 once more after their loop, to every rank (an arrival the tail does not
       wait for).
BUG "strictopen": the opening barrier missing (only the tail): remote traffic before the peer's mbarrier init.
BUG "mcast_a": A's tile multicast instead of B's (G33): the blocks of the cluster are row tiles, each needs its own
       rows of A, and every block receives the issuing block's (tests/verify/test_cluster_multicast_source.py).
BUG "mcast_a_shifted": the same, A's first row reassigned (as gemm_splitk_swap's M_SHIFT does) before the copy."""

import tilepy as tp

INSTR = tp.nv.wgmma_m64n64k16_bf16


@tp.kernel(threads=256, target="sm_90a", cluster=(2, 1, 1))
def cluster_tail(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"], C: tp.Tensor[tp.f32, "M", "N"],
                 BM: tp.constexpr = 64, BN: tp.constexpr = 64, BK: tp.constexpr = 64, S: tp.constexpr = 2,
                 BUG: tp.constexpr = "none"):
    m0 = tp.block_id(0) * BM
    n0 = tp.block_id(1) * BN
    a_s = tp.shared((BM, BK), tp.bf16, stages=S, swizzle=tp.Swizzle(3, 3, 3))
    b_s = tp.shared((BK, BN), tp.bf16, stages=S, swizzle=tp.Swizzle(3, 3, 3))
    full = tp.mbarrier(1, stages=S)
    empty = tp.mbarrier(2, stages=S)
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda k, j: ("B", k, j))
    k_tiles = tp.cdiv(A.shape[1], BK)
    if BUG == "mcast_a_shifted":
        m0 = tp.minimum(m0, A.shape[0] - BM)
    if BUG != "strictopen":
        tp.cluster_sync(relaxed=True)
    if tp.warpgroup_id() == 0:
        for k in range(k_tiles):
            tp.mbarrier_wait(empty[k % S], k // S)
            if BUG == "mcast_a" or BUG == "mcast_a_shifted":
                tp.copy_bulk(A[m0:m0 + BM, k * BK:(k + 1) * BK], a_s[k % S], full[k % S], multicast=0b11, by=k % 2)
                tp.copy_bulk(B[k * BK:(k + 1) * BK, n0:n0 + BN], b_s[k % S], full[k % S])
            else:
                tp.copy_bulk(A[m0:m0 + BM, k * BK:(k + 1) * BK], a_s[k % S], full[k % S])
                tp.copy_bulk(B[k * BK:(k + 1) * BK, n0:n0 + BN], b_s[k % S], full[k % S], multicast=0b11, by=k % 2)
            tp.mbarrier_arrive(full[k % S])
        if BUG != "notail":
            for k in range(k_tiles + (S - 1 if BUG == "short" else S)):
                if k >= k_tiles:
                    if BUG == "early":
                        tp.mbarrier_wait(empty[k % S], k // S - 1)
                    else:
                        tp.mbarrier_wait(empty[k % S], k // S)
    else:
        for s in tp.static_range(S):
            for r in tp.static_range(2):
                tp.mbarrier_arrive(empty[s], cta=r)
        acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN)))
        for k in range(k_tiles):
            tp.mbarrier_wait(full[k % S], k // S)
            acc = tp.mma(a_s[k % S], b_s[k % S], acc)
            for r in tp.static_range(2):
                tp.mbarrier_arrive(empty[k % S], cta=r)
        if BUG == "extra":
            for r in tp.static_range(2):
                tp.mbarrier_arrive(empty[0], cta=r)
        tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
        tp.store(C[m0:m0 + BM, n0:n0 + BN], acc)
