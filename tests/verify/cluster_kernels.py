"""A 2x1-cluster GEMM pipeline (B's tile multicast to both blocks of a cluster, the stage released to every block
of the cluster) with seeded bugs (`BUG`), each with the correct twin BUG=0, for the interpreter and the verifier
(tests/verify/test_cluster_bugs.py, tests/tilepy/test_clusters.py).

BUG 1: the consumers release only to their own block (`empty` counts 1): a stage is refilled by the other block's
       multicast while this block may still read it (pipeline hazard across the cluster).
BUG 2: the consumers release only to rank 0 (`cta=0`) while `empty` counts 2: rank 1's producer never sees its
       stage released (deadlock: a missing remote release).
BUG 3: no tp.cluster_sync() after the allocations: a remote arrival can reach a block whose mbarriers are not
       initialized yet (race).
BUG 4: no tp.cluster_sync() at the end: a block can exit while the other still arrives on it (race).
BUG 5: the consumers read the stage without waiting for `full`: the multicast into it is not ordered before the
       read (race).
"""

import tilepy as tp

INSTR = tp.nv.wgmma_m64n64k16_bf16


@tp.kernel(threads=256, target="sm_90a", cluster=(2, 1, 1))
def cluster_gemm(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"], C: tp.Tensor[tp.f32, "M", "N"],
                 BM: tp.constexpr = 64, BN: tp.constexpr = 64, BK: tp.constexpr = 64, S: tp.constexpr = 2,
                 BUG: tp.constexpr = 0):
    m0 = tp.block_id(0) * BM
    n0 = tp.block_id(1) * BN
    a_s = tp.shared((BM, BK), tp.bf16, stages=S, swizzle=tp.Swizzle(3, 3, 3))
    b_s = tp.shared((BK, BN), tp.bf16, stages=S, swizzle=tp.Swizzle(3, 3, 3))
    full = tp.mbarrier(1, stages=S)
    empty = tp.mbarrier(1 if BUG == 1 else 2, stages=S)
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda k, j: ("B", k, j))
    k_tiles = tp.cdiv(A.shape[1], BK)
    if BUG != 3:
        tp.cluster_sync()
    if tp.warpgroup_id() == 0:
        for k in range(k_tiles):
            tp.mbarrier_wait(empty[k % S], k // S)
            tp.copy_bulk(A[m0:m0 + BM, k * BK:(k + 1) * BK], a_s[k % S], full[k % S])
            tp.copy_bulk(B[k * BK:(k + 1) * BK, n0:n0 + BN], b_s[k % S], full[k % S], multicast=0b11, by=k % 2)
            tp.mbarrier_arrive(full[k % S])
    else:
        for s in tp.static_range(S):
            if BUG == 1:
                tp.mbarrier_arrive(empty[s])
            elif BUG == 2:
                tp.mbarrier_arrive(empty[s], cta=0)
                tp.mbarrier_arrive(empty[s], cta=0)
            else:
                for r in tp.static_range(2):
                    tp.mbarrier_arrive(empty[s], cta=r)
        acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN)))
        for k in range(k_tiles):
            if BUG != 5:
                tp.mbarrier_wait(full[k % S], k // S)
            acc = tp.mma(a_s[k % S], b_s[k % S], acc)
            if BUG == 1:
                tp.mbarrier_arrive(empty[k % S])
            elif BUG == 2:
                tp.mbarrier_arrive(empty[k % S], cta=0)
                tp.mbarrier_arrive(empty[k % S], cta=0)
            else:
                for r in tp.static_range(2):
                    tp.mbarrier_arrive(empty[k % S], cta=r)
        tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
        tp.store(C[m0:m0 + BM, n0:n0 + BN], acc)
    if BUG != 4:
        tp.cluster_sync()


@tp.kernel(threads=256, target="sm_90a", cluster=(2, 1, 1))
def cluster_gemm_peer(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"],
                      C: tp.Tensor[tp.f32, "M", "N"], BM: tp.constexpr = 64, BN: tp.constexpr = 64,
                      BK: tp.constexpr = 64, S: tp.constexpr = 2, BUG: tp.constexpr = 0):
    """cluster_gemm with the releases written per rank: to the block itself and to its peer (rank ^ 1); BUG 6
    releases twice to itself and never to the peer (the count is met without the peer: a pipeline hazard)."""
    m0 = tp.block_id(0) * BM
    n0 = tp.block_id(1) * BN
    a_s = tp.shared((BM, BK), tp.bf16, stages=S, swizzle=tp.Swizzle(3, 3, 3))
    b_s = tp.shared((BK, BN), tp.bf16, stages=S, swizzle=tp.Swizzle(3, 3, 3))
    full = tp.mbarrier(1, stages=S)
    empty = tp.mbarrier(2, stages=S)
    k_tiles = tp.cdiv(A.shape[1], BK)
    tp.cluster_sync()
    if tp.warpgroup_id() == 0:
        for k in range(k_tiles):
            tp.mbarrier_wait(empty[k % S], k // S)
            tp.copy_bulk(A[m0:m0 + BM, k * BK:(k + 1) * BK], a_s[k % S], full[k % S])
            tp.copy_bulk(B[k * BK:(k + 1) * BK, n0:n0 + BN], b_s[k % S], full[k % S], multicast=0b11, by=k % 2)
            tp.mbarrier_arrive(full[k % S])
    else:
        peer = tp.cluster_rank() if BUG == 6 else tp.cluster_rank() ^ 1
        for s in tp.static_range(S):
            tp.mbarrier_arrive(empty[s], cta=tp.cluster_rank())
            tp.mbarrier_arrive(empty[s], cta=peer)
        acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN)))
        for k in range(k_tiles):
            tp.mbarrier_wait(full[k % S], k // S)
            acc = tp.mma(a_s[k % S], b_s[k % S], acc)
            tp.mbarrier_arrive(empty[k % S], cta=tp.cluster_rank())
            tp.mbarrier_arrive(empty[k % S], cta=peer)
        tp.store(C[m0:m0 + BM, n0:n0 + BN], acc)
    tp.cluster_sync()
