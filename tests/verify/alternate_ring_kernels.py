"""Two consumer roles taking alternate k-tiles of one mbarrier ring (cuBLAS's in-block K split: a producer warp
and two consumers, consumer c handling the tiles k with k % 2 == c): the producer fills stage k % S for every k
and waits empty[k % S]; consumer c waits full[k % S] and releases empty[k % S] only for its own tiles. With S
odd stage s is released by each consumer in turn, so the empty mbarriers are arrived on by two roles whose
arrivals alternate (sync.alternating); with S even each stage belongs to one consumer (the other's arrive ops
on it never run: sync.drop_dead_roles). `BUG` "none" is the correct twin. tests/verify/test_alternate_ring.py
verifies each (clean, or caught with a counterexample) and runs it on the interpreter (the bug is real)."""

import tilepy as tp


@tp.kernel(threads=96, target="sm_90a")
def alternate(X: tp.Tensor[tp.f32, "R", 64], Y: tp.Tensor[tp.f32, "R", 64], BR: tp.constexpr = 32,
              STAGES: tp.constexpr = 3, PRE: tp.constexpr = False, BUG: tp.constexpr = "none"):
    """Y = X through the ring. PRE: consumer 0 pre-releases every stage before its loop, and the producer waits
    empty[k % S] for phase k // S from the first round on (instead of k // S - 1 from the second)."""
    tp.tag(X, lambda r, c: ("X", r, c))
    buf = tp.shared((BR, 64), tp.f32, stages=STAGES)
    full = tp.mbarrier(1, stages=STAGES)
    if BUG == "count":
        empty = tp.mbarrier(2, stages=STAGES)                       # alt: two releases awaited, one comes
    else:
        empty = tp.mbarrier(1, stages=STAGES)                       # alt: one consumer releases each tile
    n = X.shape[0] // BR
    if tp.warp_id() == 0:                                           # alt: producer warp, every k-tile
        for k in range(n):
            if PRE:
                if BUG == "early":
                    tp.mbarrier_wait(empty[k % STAGES], k // STAGES - 1)    # alt: a round early
                else:
                    tp.mbarrier_wait(empty[k % STAGES], k // STAGES)        # alt: (pre-released: phase 0 done)
            elif k >= STAGES:
                if BUG == "early":
                    tp.mbarrier_wait(empty[k % STAGES], k // STAGES - 2)    # alt: a round early
                else:
                    tp.mbarrier_wait(empty[k % STAGES], k // STAGES - 1)
            tp.copy_bulk(X[k * BR:(k + 1) * BR, 0:64], buf[k % STAGES], full[k % STAGES])
            tp.mbarrier_arrive(full[k % STAGES])
    elif tp.warp_id() == 1:                                         # alt: consumer 0, the even k-tiles
        if PRE:
            for s in tp.static_range(STAGES):
                tp.mbarrier_arrive(empty[s])                        # alt: every stage free at the start
        for k in range(n):
            if k % 2 == 0:
                tp.mbarrier_wait(full[k % STAGES], k // STAGES)
                if BUG == "releasefirst":
                    tp.mbarrier_arrive(empty[k % STAGES])           # alt: released before its read
                x = tp.load(buf[k % STAGES], layout=tp.blocked((BR, 64), 32, 4))   # alt: consumer 0 reads
                tp.assert_tag(x, lambda t, r: t[1] == r, at=((k * BR + tp.arange(BR))[:, None],))
                tp.store(Y[k * BR:(k + 1) * BR, 0:64], x)
                if BUG != "releasefirst":
                    tp.mbarrier_arrive(empty[k % STAGES])
    else:                                                           # alt: consumer 1, the odd k-tiles
        for k in range(n):
            if BUG == "double":
                if k % 2 == 0:
                    tp.mbarrier_arrive(empty[k % STAGES])           # alt: releases consumer 0's tiles too
            if k % 2 == 1:
                if BUG == "phase":
                    tp.mbarrier_wait(full[k % STAGES], k // STAGES + 1)     # alt: a round late
                else:
                    tp.mbarrier_wait(full[k % STAGES], k // STAGES)
                if BUG == "stage":
                    x = tp.load(buf[(k + 1) % STAGES], layout=tp.blocked((BR, 64), 32, 4))  # alt: next stage
                else:
                    x = tp.load(buf[k % STAGES], layout=tp.blocked((BR, 64), 32, 4))   # alt: consumer 1 reads
                tp.assert_tag(x, lambda t, r: t[1] == r, at=((k * BR + tp.arange(BR))[:, None],))
                tp.store(Y[k * BR:(k + 1) * BR, 0:64], x)
                if BUG == "skip":
                    if k != 1:
                        tp.mbarrier_arrive(empty[k % STAGES])       # alt: tile 1's stage never released
                else:
                    tp.mbarrier_arrive(empty[k % STAGES])


# (BUG, checks of which one must report it, what the interpreter shows)
BUGS = [
    ("count", {"deadlock"}, "deadlock"),
    ("early", {"pipeline_hazard"}, "hazard"),
    ("releasefirst", {"pipeline_hazard"}, "hazard"),
    ("phase", {"deadlock"}, "deadlock"),
    ("stage", {"pipeline_hazard", "tag_assertion"}, "wrong"),
    ("skip", {"deadlock"}, "deadlock"),
    ("double", {"pipeline_hazard"}, "hazard"),
]


@tp.kernel(threads=384, target="sm_90a")
def split_k(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"], C: tp.Tensor[tp.f32, "M", "N"],
            D: tp.Tensor[tp.f32, "M", "N"], BM: tp.constexpr = 64, BN: tp.constexpr = 64, BK: tp.constexpr = 64,
            STAGES: tp.constexpr = 3, BUG: tp.constexpr = "none"):
    """The GEMM form (a 384-thread block: a producer warpgroup, two wgmma consumer warpgroups on alternate
    k-tiles of one ring, each with its own accumulator): C + D = A B, C from the even k-tiles, D the odd."""
    W = tp.nv.wgmma_m64n64k16_bf16
    m0 = tp.block_id(0) * BM
    n0 = tp.block_id(1) * BN
    a_s = tp.shared((BM, BK), tp.bf16, stages=STAGES, swizzle=tp.Swizzle(3, 3, 3))
    b_s = tp.shared((BK, BN), tp.bf16, stages=STAGES, swizzle=tp.Swizzle(3, 3, 3))
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda k, j: ("B", k, j))
    k_tiles = tp.cdiv(A.shape[1], BK)
    if tp.warpgroup_id() == 0:                                      # split: producer warpgroup
        for k in range(k_tiles):
            if k >= STAGES:
                tp.mbarrier_wait(empty[k % STAGES], k // STAGES - 1)
            k0 = k * BK
            tp.copy_bulk(A[m0:m0 + BM, k0:k0 + BK], a_s[k % STAGES], full[k % STAGES])
            tp.copy_bulk(B[k0:k0 + BK, n0:n0 + BN], b_s[k % STAGES], full[k % STAGES])
            tp.mbarrier_arrive(full[k % STAGES])
    elif tp.warpgroup_id() == 1:                                    # split: consumer 0, the even k-tiles
        acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(W, (BM, BN)))
        for k in range(k_tiles):
            if k % 2 == 0:
                tp.mbarrier_wait(full[k % STAGES], k // STAGES)
                acc = tp.mma_async(a_s[k % STAGES], b_s[k % STAGES], acc)
                tp.mma_wait(0)
                tp.mbarrier_arrive(empty[k % STAGES])
        tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
        tp.store(C[m0:m0 + BM, n0:n0 + BN], acc)
    else:                                                           # split: consumer 1, the odd k-tiles
        acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(W, (BM, BN)))
        for k in range(k_tiles):
            if k % 2 == 1:
                if BUG == "phase":
                    tp.mbarrier_wait(full[k % STAGES], k // STAGES - 1)     # split: a round early
                else:
                    tp.mbarrier_wait(full[k % STAGES], k // STAGES)
                acc = tp.mma_async(a_s[k % STAGES], b_s[k % STAGES], acc)
                if BUG == "inflight":
                    tp.mbarrier_arrive(empty[k % STAGES])           # split: released while its group reads it
                    tp.mma_wait(0)
                else:
                    tp.mma_wait(0)
                    tp.mbarrier_arrive(empty[k % STAGES])
        tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
        tp.store(D[m0:m0 + BM, n0:n0 + BN], acc)


# split_k's (BUG, checks of which one must report it, what the interpreter shows; None: the interpreter runs a
# wgmma group synchronously, so a stage released while its group is in flight changes nothing there)
SPLIT_BUGS = [
    ("phase", {"pipeline_hazard"}, "wrong"),
    ("inflight", {"pipeline_hazard"}, None),
]


@tp.kernel(threads=384, target="sm_90a")
def split_k1(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"], C: tp.Tensor[tp.f32, "M", "N"],
             D: tp.Tensor[tp.f32, "M", "N"], BM: tp.constexpr = 64, BN: tp.constexpr = 64, BK: tp.constexpr = 64,
             STAGES: tp.constexpr = 4, BUG: tp.constexpr = "none"):
    """split_k with one wgmma group in flight in each consumer: consumer c issues tile k's group, waits until one
    is in flight (its tile k - 2 retired) and releases tile k - 2's stage; after its loop it retires the last."""
    W = tp.nv.wgmma_m64n64k16_bf16
    m0 = tp.block_id(0) * BM
    n0 = tp.block_id(1) * BN
    a_s = tp.shared((BM, BK), tp.bf16, stages=STAGES, swizzle=tp.Swizzle(3, 3, 3))
    b_s = tp.shared((BK, BN), tp.bf16, stages=STAGES, swizzle=tp.Swizzle(3, 3, 3))
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda k, j: ("B", k, j))
    k_tiles = tp.cdiv(A.shape[1], BK)
    if tp.warpgroup_id() == 0:                                      # split1: producer warpgroup
        for k in range(k_tiles):
            if k >= STAGES:
                tp.mbarrier_wait(empty[k % STAGES], k // STAGES - 1)
            k0 = k * BK
            tp.copy_bulk(A[m0:m0 + BM, k0:k0 + BK], a_s[k % STAGES], full[k % STAGES])
            tp.copy_bulk(B[k0:k0 + BK, n0:n0 + BN], b_s[k % STAGES], full[k % STAGES])
            tp.mbarrier_arrive(full[k % STAGES])
    elif tp.warpgroup_id() == 1:                                    # split1: consumer 0, the even k-tiles
        acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(W, (BM, BN)))
        for k in range(k_tiles):
            if k % 2 == 0:
                tp.mbarrier_wait(full[k % STAGES], k // STAGES)
                acc = tp.mma_async(a_s[k % STAGES], b_s[k % STAGES], acc)
                tp.mma_wait(1)
                if k >= 2:
                    tp.mbarrier_arrive(empty[(k - 2) % STAGES])    # split1: its tile k - 2 retired
        tp.mma_wait(0)
        tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
        tp.store(C[m0:m0 + BM, n0:n0 + BN], acc)
    else:                                                           # split1: consumer 1, the odd k-tiles
        acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(W, (BM, BN)))
        for k in range(k_tiles):
            if k % 2 == 1:
                tp.mbarrier_wait(full[k % STAGES], k // STAGES)
                acc = tp.mma_async(a_s[k % STAGES], b_s[k % STAGES], acc)
                if BUG == "wait2":
                    tp.mma_wait(2)                                  # split1: tile k - 2's group may still run
                else:
                    tp.mma_wait(1)
                if BUG == "own":
                    tp.mbarrier_arrive(empty[k % STAGES])           # split1: the stage its own group reads
                elif BUG == "other":
                    tp.mbarrier_arrive(empty[(k - 1) % STAGES])     # split1: consumer 0's tile k - 1
                elif BUG == "skip":
                    if k >= 2 and k != 3:
                        tp.mbarrier_arrive(empty[(k - 2) % STAGES])   # split1: tile 1's stage never released
                elif k >= 2:
                    tp.mbarrier_arrive(empty[(k - 2) % STAGES])
        tp.mma_wait(0)
        tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
        tp.store(D[m0:m0 + BM, n0:n0 + BN], acc)


# split_k1's (BUG, checks of which one must report it, what the interpreter shows; None: a wgmma group in flight,
# which the interpreter does not have)
SPLIT1_BUGS = [
    ("wait2", {"pipeline_hazard"}, None),
    ("own", {"pipeline_hazard"}, None),
    ("other", {"pipeline_hazard", "deadlock"}, "deadlock"),
    ("skip", {"deadlock"}, "deadlock"),
]
