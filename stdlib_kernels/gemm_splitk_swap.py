"""Split-K GEMM for decode shapes with the operands swapped (swap-AB): C = A @ B for A (M, K) with few rows
(M <= 64), B (K, N), computed as C^T = B^T @ A^T so that the few rows of A become the wgmma instruction's N (8-256)
instead of padding its M (64): the block's tile is BN columns of C (the instruction's M: 64 per consumer warpgroup)
by BM rows of C (the instruction's N, 16 for a 16-row decode).

Why (benchmarks/NOTES.md, G8): at 16 x 4096 x 4096 the GEMM streams B (32 MB) and nothing else matters; cuBLAS
runs a 128 x 16 tile of C^T with 11 stages and split-K (its nvjet `128x16_64x11 ... splitK` kernel, 7.1 us, plus a
split-K reduce), while gemm_splitk's 64 x 128 tiles pad A's 16 rows to 64 in every stage: 24 KB a stage of which
6 KB are zeros, 6 stages, 12.4 us. Here a stage is B's (BK, BN) tile plus A's (BM, BK) rows only (16 + 2 KB at
BN = 128, BM = 16): 8 stages hold 128 KB of B per block (6 x 16 KB before). Measured on the H100: 9.4-9.6 us at
16 x 4096 x 4096 (BN 128, two consumers, 8 or 11 stages, split 4), 0.93-0.95x cuBLAS; more row tiles (BM 16 at 32 or
64 rows) re-read B and lose (NOTES.md).

The staging is gemm_splitk's: B's (BK, BN) tile as BN / 64 column blocks of 128-byte swizzled rows (what the TMA
box writes), read by the instruction as its A operand through `.T` (MN-major: the descriptor's transpose bit, legal
for 16-bit types); A's (BM, BK) rows with the 128-byte swizzle, read as the instruction's B operand through `.T`
(K-major, as gemm_hopper's B_NK form reads a weight). The accumulator is the (BN, BM) tile of C^T; its transpose
(`acc.T`, a relabelling of the registers) is stored.

Block z (grid z = SPLIT_K) sums its share of the k-tiles and stores its partial tile into slot z of WS (gemm_splitk's
FIXUP=3 layout: SPLIT_K slots of cdiv(M, BM) * BM rows); `splitk_sum` adds the slots and rounds once into C. C and
LOCKS are not used here: the signature is gemm_splitk's, so `gemm_hopper.launch` runs it through the same plan
(SWAP_AB=1 with SPLIT_K > 1 and FIXUP=3 picks it).

SPLIT_K=1: no split; the consumers store C^T's tile transposed into C itself (C's dtype; WS and LOCKS unused).
CLUSTER_M > 1: thread-block clusters of CLUSTER_M row tiles (grid x) over the same BN columns of C, cuBLAS's form
at 32-128 rows (its nvjet `64x16_64x16_1x2` / `64x32_64x16_1x2` / `64x64_64x13_2x1` kernels: tiles of C^T in 2-block
clusters, 13-16 stages, no split): B's tile, the only large operand, is loaded once per cluster by a TMA multicast
into the same stage of every block (issued by rank k % CLUSTER_M), so B is read once however many row tiles there
are; as in gemm_cluster, a stage is refilled only after the consumers of every block released it (`empty[s]` counts
CLUSTER_M arrivals, made remotely), with a cluster barrier after the mbarriers' initialization and before exit.
B_NK=1 (`gemm_splitk_swap_nk`): B given as (N, K), an nn.Linear weight read in place; its (BN, BK) tile is K-major,
the instruction's A operand without the transpose bit.
K_WAYS=2 (CONSUMERS=2, BN a multiple of 64): the two consumer warpgroups share ONE (BN, BM) tile of C^T, consumer r
taking the k-tiles 2j + r into an accumulator of its own; consumer 1 hands its sum to consumer 0 through a shared
(BN, BM) f32 tile (laid out thread-major, no bank conflicts) and consumer 0 adds it and stores. cuBLAS's form at 32-128
rows (384 threads on a 64 x 16 / 64 x 32 / 64 x 64 tile of C^T): one consumer taking every k-tile in turn is
latency-bound (G10's ncu: 22% of DRAM's and 21% of L2's peak), two keep twice the wgmma groups and TMA loads in
flight. The producer puts k-tile 2j + r into ring r (its own tiles and full / empty mbarriers, STAGES stages each, so
the block holds 2 x STAGES k-tiles), so each consumer runs a plain producer / consumer ring. A split's k-tile count is
rounded up to even (zeros past K). Its bulk copies are TMA only (`fallback=False`: the per-element fallback doubled
the producer's code and spilled at 168 registers); `launch` pads rows that are not 16-byte multiples.
M_SHIFT=1 (with K_WAYS=2, M >= BM): the last row tile is shifted back to end at M, so A's box holds no rows past M
(they cost the K_WAYS kernel time: H100, 80 x 4096 x 4096 20.7 us as given against 16.5 with A padded to whole
tiles); its rows below the tile's own first row belong to the previous tile and are masked out of its store.
CLUSTER_N (2 or 4, with K_WAYS=2; G33): the grid's column tiles in (1, CLUSTER_N, 1) clusters over one row tile, A's
tile multicast into every block (cuBLAS's nvjet 128x64_64x8_1x2 at 1024-row shapes), each release sent to every block.
RELAXED=1 (with CLUSTER_M or CLUSTER_N, K_WAYS=2; G33): the opening cluster barrier relaxed (the mbarriers' init is
fenced at cluster scope) and no closing one: the producer's tail waits, per ring, for the releases pairs .. pairs +
STAGES - IN_FLIGHT - 1 (every release any block's consumers make into this block; the last IN_FLIGHT pairs' stages
are never released, nobody waits for them), tilepy-verify's `remote_writes_awaited`. 1.0-1.1 us a call cheaper than
the full barriers, but the clustered forms lose to the unclustered one by ~0.07 us a k-tile (H100, benchmarks/NOTES.md
G33): not in the policy.
CLUSTER_K=2 (with K_WAYS=2, SPLIT_K=1; G14): grid z = 2 is a (1, 1, 2) cluster, rank r summing half of the k-tiles;
consumer 0 of each block writes the block's sum into its hand-over tile, a cluster barrier publishes it, rank 0's
consumer 0 adds rank 1's tile read through distributed shared memory (`tp.load(red, cta=1)`) and stores C, and a
relaxed cluster barrier keeps rank 1 until then: a split of K with no slots and no splitk_sum (H100: 20-128 rows of
N = K = 4096 0.60-0.93 -> 0.73-0.97x cuBLAS; benchmarks/NOTES.md G14).
PUSH=1 (with CLUSTER_K=2; G19): each rank's consumer 0 pushes the block's sum into the other rank's `recv` by
st.async (tp.store_remote, completing its mbarrier: no cluster barrier after the k-loop, no fence), adds the other's,
and stores half the tile's columns. XCH=1 (with PUSH=1; G23): `recv` is `red` itself: consumer 0, having read consumer
1's sum, pushes the sum's row totals into the other rank's `flag` (st.async completing its `xfree`: values computed
from every thread's reads of `red`, so the signal cannot leave before them) and pushes its sum once its own `xfree`
has completed (the other rank's `red` read): one (BN, BM) f32 tile instead of two (plus BN floats), so the pushed
exchange fits beside 4 stages per ring at BM 112 / 128 (3 there before, which lost). tilepy-verify proves the
cross-block order above (checks/cluster._receive_tile_order: a push into a tile read before it needs a signal
computed from the read, waited for before the push; docs/verification.md).
"""

import tilepy as tp

from . import gemm_hopper
from .gemm_hopper import _threads, b_layout, splitk_sum, splitk_sum_bf16  # noqa: F401  (the sum, re-exported)


def _red_layout(BN, BM):
    """The hand-over tile of the K_WAYS=2 form, (BN, BM) f32 laid out thread-major: element (row, col) of the
    accumulator (wgmma m64nBMk16's C fragment over one warpgroup, BN / 64 row blocks) at 128 * value + thread, so each
    store / load of one value index is 128 consecutive words (no bank conflicts)."""
    return tp.Layout(((8, 2, 4, BN // 64), (2, 4, BM // 8)), ((4, 256, 32, 64 * BM), (128, 1, 512)))


def _recv_layout(BN, BM):
    """The tile PUSH=1 receives, (BN, BM) f32 laid out so each thread's values of the accumulator (wgmma m64nBMk16's
    C fragment, BN / 64 row blocks) lie in runs of 4 (its values (e, h) of one column pair j), the 32 threads of a
    warp side by side: every st.async / load of it is 16 bytes a thread, 512 contiguous bytes a warp."""
    return tp.Layout(((8, 2, 4, BN // 64), (2, 4, BM // 8)), ((16, 2, 128, 512 * (BM // 8)), (1, 4, 512)))


def _cluster(c):
    return (c["CLUSTER_M"], c["CLUSTER_N"], c["CLUSTER_K"])


# (unsigned_role_index: the hand-over and C^T store index shared tiles through layouts of the role index; G37 measured
# the unsigned form 0.5-1.1 us a call faster, NOTES "G37")
@tp.kernel(threads=_threads, target="sm_90a", cluster=_cluster, unsigned_role_index=True)
def gemm_splitk_swap(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"],
                     C: tp.Tensor[tp.f32, "M", "N"], WS: tp.Tensor[tp.f32, "WR", "WC"], LOCKS: tp.Tensor[tp.i32, "T"],
                     BM: tp.constexpr = 16, BN: tp.constexpr = 128, BK: tp.constexpr = 64,
                     STAGES: tp.constexpr = 11, CONSUMERS: tp.constexpr = 2,
                     INSTR: tp.constexpr = tp.nv.wgmma_m64n16k16_bf16, SWIZZLE: tp.constexpr = tp.Swizzle(3, 3, 3),
                     SPLIT_K: tp.constexpr = 4, IN_FLIGHT: tp.constexpr = 1, CLUSTER_M: tp.constexpr = 1,
                     B_NK: tp.constexpr = 0, K_WAYS: tp.constexpr = 1, M_SHIFT: tp.constexpr = 0,
                     CLUSTER_K: tp.constexpr = 1, PUSH: tp.constexpr = 0, XCH: tp.constexpr = 0,
                     CLUSTER_N: tp.constexpr = 1, RELAXED: tp.constexpr = 0):
    m0 = tp.block_id(0) * BM
    n0 = tp.block_id(1) * BN
    # C^T's tile: 64 of its rows (C's columns) per consumer; with K_WAYS=2 the whole tile in each consumer
    LC = tp.accumulator(INSTR, (BN, BM), (CONSUMERS // K_WAYS, 1))
    if K_WAYS == 2:
        # two consumer warpgroups over ONE tile of C^T, consumer r taking the k-tiles k with k % 2 == r into an
        # accumulator of its own (cuBLAS's 384-thread nvjet_sm90_tst_64x16_64x16_1x2 form): two rings, ring r holding
        # the k-tiles 2j + r in stage j % STAGES with full / empty mbarriers of its own, so each consumer has a plain
        # producer / consumer ring; consumer 1 hands its sum to consumer 0 through shared memory (red, red_full).
        # (Written out per ring: compile-time tuples of tiles cannot be bound under an `if`.)
        a_s0 = tp.shared((BM, BK), tp.bf16, stages=STAGES, swizzle=SWIZZLE)
        a_s1 = tp.shared((BM, BK), tp.bf16, stages=STAGES, swizzle=SWIZZLE)
        if B_NK:
            b_s0 = tp.shared((BN, BK), tp.bf16, stages=STAGES, swizzle=SWIZZLE)
            b_s1 = tp.shared((BN, BK), tp.bf16, stages=STAGES, swizzle=SWIZZLE)
        else:
            b_s0 = tp.shared((BK, BN), tp.bf16, stages=STAGES, swizzle=SWIZZLE, layout=b_layout(BK, BN))
            b_s1 = tp.shared((BK, BN), tp.bf16, stages=STAGES, swizzle=SWIZZLE, layout=b_layout(BK, BN))
        full0 = tp.mbarrier(1, stages=STAGES)
        full1 = tp.mbarrier(1, stages=STAGES)
        # with a cluster (of row tiles sharing B, or of column tiles sharing A): the consumers of every block of it
        empty0 = tp.mbarrier(CLUSTER_M * CLUSTER_N, stages=STAGES)
        empty1 = tp.mbarrier(CLUSTER_M * CLUSTER_N, stages=STAGES)
        if CLUSTER_K > 1 and PUSH and XCH:
            # one tile for both hand-overs (G23): consumer 1's sum, then, once consumer 0 has read it, the other
            # rank's (pushed after this block's arrival on its `xfree`): PUSH beside 4 stages at BM 112 / 128
            red = tp.shared((BN, BM), tp.f32, layout=_recv_layout(BN, BM))
            flag = tp.shared((BN,), tp.f32)     # the other rank's signal that its `red` is read (its row sums)
            xfree = tp.mbarrier(1)
        else:
            red = tp.shared((BN, BM), tp.f32, layout=_red_layout(BN, BM))   # (thread-major: no bank conflicts)
        red_full = tp.mbarrier(1)
        if CLUSTER_K > 1 and PUSH:      # the other rank's sum, pushed into this block (st.async), and its mbarrier
            if not XCH:
                recv = tp.shared((BN, BM), tp.f32, layout=_recv_layout(BN, BM))
            recv_full = tp.mbarrier(1)
        tp.tag(A, lambda i, k: ("A", i, k))
        if B_NK:
            tp.tag(B, lambda j, k: ("B", k, j))
        else:
            tp.tag(B, lambda k, j: ("B", k, j))
        if SPLIT_K > 1:
            z = tp.block_id(2)
            # an even count per split (each consumer the same share; zeros past K), so no split's pairs reach the next
            k_tiles = 2 * tp.cdiv(tp.cdiv(tp.cdiv(A.shape[1], BK), SPLIT_K), 2)
            k_first = z * k_tiles
        elif CLUSTER_K > 1:
            # the split is the cluster (grid z = CLUSTER_K blocks of one cluster): rank r's share of the k-tiles, its
            # sum handed to rank 0 through distributed shared memory (below): no slots, no second kernel
            k_tiles = 2 * tp.cdiv(tp.cdiv(tp.cdiv(A.shape[1], BK), CLUSTER_K), 2)
            k_first = tp.block_id(2) * k_tiles
        else:
            k_tiles = tp.cdiv(A.shape[1], BK)
            k_first = 0
        pairs = tp.cdiv(k_tiles, 2)     # (an odd count's last pair reads zeros into ring 1)
        own = m0                        # the first row of C this block stores
        if M_SHIFT:
            # the last row tile ends at M (M >= BM): its A box lies wholly inside A (rows past M in the box cost
            # time); its rows below `own` are the previous tile's, computed twice and stored once, by that tile
            m0 = tp.minimum(own, A.shape[0] - BM)
        if CLUSTER_M * CLUSTER_N > 1:
            # every block's mbarriers are initialized before any other block multicasts or arrives into them (RELAXED:
            # an execution barrier, tp.mbarrier's init being fenced at cluster scope; no release, no MEMBAR)
            tp.cluster_sync(relaxed=RELAXED == 1)
        if CLUSTER_K > 1 and PUSH:
            # the other block's recv_full is initialized before this block pushes into it (tp.mbarrier's init is
            # fenced at cluster scope, so an execution barrier publishes it: no release, no MEMBAR)
            tp.cluster_sync(relaxed=True)
        if tp.warpgroup_id() == 0:      # producer: pair j's k-tile 2j + r into ring r, stage j % STAGES
            for j in range(pairs):
                tp.mbarrier_wait(empty0[j % STAGES], j // STAGES)        # (the consumers pre-release the stages)
                k0 = (k_first + 2 * j) * BK
                if CLUSTER_N > 1:   # A's tile multicast into every block of the cluster (one row tile), in turns
                    tp.copy_bulk(A[m0:m0 + BM, k0:k0 + BK], a_s0[j % STAGES], full0[j % STAGES],
                                 multicast=(1 << CLUSTER_N) - 1, by=j % CLUSTER_N, fallback=False)
                else:
                    tp.copy_bulk(A[m0:m0 + BM, k0:k0 + BK], a_s0[j % STAGES], full0[j % STAGES], fallback=False)
                if CLUSTER_M > 1:   # B's tile multicast into every block of the cluster, the ranks taking turns
                    if B_NK:
                        tp.copy_bulk(B[n0:n0 + BN, k0:k0 + BK], b_s0[j % STAGES], full0[j % STAGES],
                                     multicast=(1 << CLUSTER_M) - 1, by=j % CLUSTER_M, fallback=False)
                    else:
                        tp.copy_bulk(B[k0:k0 + BK, n0:n0 + BN], b_s0[j % STAGES], full0[j % STAGES],
                                     multicast=(1 << CLUSTER_M) - 1, by=j % CLUSTER_M, fallback=False)
                elif B_NK:
                    tp.copy_bulk(B[n0:n0 + BN, k0:k0 + BK], b_s0[j % STAGES], full0[j % STAGES], fallback=False)
                else:
                    tp.copy_bulk(B[k0:k0 + BK, n0:n0 + BN], b_s0[j % STAGES], full0[j % STAGES], fallback=False)
                tp.mbarrier_arrive(full0[j % STAGES])
                tp.mbarrier_wait(empty1[j % STAGES], j // STAGES)
                k0 = (k_first + 2 * j + 1) * BK
                if CLUSTER_N > 1:   # A's tile multicast into every block of the cluster (one row tile), in turns
                    tp.copy_bulk(A[m0:m0 + BM, k0:k0 + BK], a_s1[j % STAGES], full1[j % STAGES],
                                 multicast=(1 << CLUSTER_N) - 1, by=j % CLUSTER_N, fallback=False)
                else:
                    tp.copy_bulk(A[m0:m0 + BM, k0:k0 + BK], a_s1[j % STAGES], full1[j % STAGES], fallback=False)
                if CLUSTER_M > 1:
                    if B_NK:
                        tp.copy_bulk(B[n0:n0 + BN, k0:k0 + BK], b_s1[j % STAGES], full1[j % STAGES],
                                     multicast=(1 << CLUSTER_M) - 1, by=j % CLUSTER_M, fallback=False)
                    else:
                        tp.copy_bulk(B[k0:k0 + BK, n0:n0 + BN], b_s1[j % STAGES], full1[j % STAGES],
                                     multicast=(1 << CLUSTER_M) - 1, by=j % CLUSTER_M, fallback=False)
                elif B_NK:
                    tp.copy_bulk(B[n0:n0 + BN, k0:k0 + BK], b_s1[j % STAGES], full1[j % STAGES], fallback=False)
                else:
                    tp.copy_bulk(B[k0:k0 + BK, n0:n0 + BN], b_s1[j % STAGES], full1[j % STAGES], fallback=False)
                tp.mbarrier_arrive(full1[j % STAGES])
            if RELAXED:
                # the tail, in place of the closing cluster barrier: it waits for every release the consumers of
                # every block make into this block (the only remote writes but the multicasts, which complete on
                # its own `full`, waited for by its consumers). A ring's consumers release STAGES - IN_FLIGHT
                # stages up front and one a pair, the last IN_FLIGHT pairs' never (nobody waits for them): its
                # releases number pairs + STAGES - IN_FLIGHT, the loop above waited for the first `pairs`
                for j in range(pairs + STAGES - IN_FLIGHT):
                    if j >= pairs:
                        tp.mbarrier_wait(empty0[j % STAGES], j // STAGES)
                        tp.mbarrier_wait(empty1[j % STAGES], j // STAGES)
        else:
            if tp.warpgroup_id() == 1:   # consumer 0: ring 0, the k-tiles 2j + 0
                acc = tp.zeros((BN, BM), tp.f32, layout=LC)
                for s in tp.static_range(STAGES - IN_FLIGHT):     # the ring's stages start released
                    if CLUSTER_M * CLUSTER_N > 1:
                        for q in tp.static_range(CLUSTER_M * CLUSTER_N):
                            tp.mbarrier_arrive(empty0[s], cta=q)
                    else:
                        tp.mbarrier_arrive(empty0[s])
                for j in range(pairs):
                    tp.mbarrier_wait(full0[j % STAGES], j // STAGES)
                    if B_NK:
                        acc = tp.mma_async(b_s0[j % STAGES], a_s0[j % STAGES].T, acc)
                    else:
                        acc = tp.mma_async(b_s0[j % STAGES].T, a_s0[j % STAGES].T, acc)
                    tp.mma_wait(IN_FLIGHT)
                    if CLUSTER_M * CLUSTER_N > 1:
                        for q in tp.static_range(CLUSTER_M * CLUSTER_N):
                            tp.mbarrier_arrive(empty0[(j + STAGES - IN_FLIGHT) % STAGES], cta=q)
                    else:
                        tp.mbarrier_arrive(empty0[(j + STAGES - IN_FLIGHT) % STAGES])   # pair j - IN_FLIGHT's: retired
                tp.mma_wait(0)
                tp.assert_tag(tp.mma_operands(acc), lambda b, a: b[1] == a[2])   # B's k is A's k
                tp.mbarrier_wait(red_full, 0)     # consumer 1's sum, added; then the tile is stored
                acc = acc + tp.load(red, layout=LC)
                if CLUSTER_K > 1 and PUSH:
                    # the block's sum pushed into the other rank's `recv` (st.async, completing its recv_full: no
                    # cluster barrier, no fence), the other's received; each rank stores half the tile's columns of
                    # C (rows of C^T: consumer 0's warps 0-1 on rank 0, 2-3 on rank 1)
                    if XCH:
                        # `red` read: the other rank may push into it. The signal is the sum's rows pushed into
                        # its `flag` (st.async completing its `xfree`): values computed from every thread's reads
                        # of `red`, so no signal leaves before those reads have returned. This block pushes once
                        # its own `xfree` completes (the other's `red` read too), then receives into its `red`
                        tp.store_remote(flag, tp.sum(acc, axis=1), xfree, tp.cluster_rank() ^ 1)
                        tp.mbarrier_wait(xfree, 0)
                        tp.store_remote(red, acc, recv_full, tp.cluster_rank() ^ 1)
                        tp.mbarrier_wait(recv_full, 0)
                        acc = acc + tp.load(red, layout=LC)
                    else:
                        tp.store_remote(recv, acc, recv_full, tp.cluster_rank() ^ 1)
                        tp.mbarrier_wait(recv_full, 0)
                        acc = acc + tp.load(recv, layout=LC)
                    mine = tp.arange(BN)[None, :] * 2 // BN == tp.block_id(2)
                    if M_SHIFT:
                        tp.store(C[m0:m0 + BM, n0:n0 + BN], acc.T, mask=mine & (m0 + tp.arange(BM)[:, None] >= own))
                    else:
                        tp.store(C[m0:m0 + BM, n0:n0 + BN], acc.T, mask=mine)
                elif CLUSTER_K > 1:
                    tp.store(red, acc)            # the block's sum, for rank 0 (after the cluster barrier below)
                elif SPLIT_K > 1:
                    mine = z * tp.num_blocks(0) * BM + m0          # split z's slot (rows as C's)
                    if M_SHIFT:
                        tp.store(WS[mine:mine + BM, n0:n0 + BN], acc.T,
                                 mask=(m0 + tp.arange(BM)[:, None] >= own) & (tp.arange(BN)[None, :] >= 0))
                    else:
                        tp.store(WS[mine:mine + BM, n0:n0 + BN], acc.T)
                elif M_SHIFT:
                    tp.store(C[m0:m0 + BM, n0:n0 + BN], acc.T,
                             mask=(m0 + tp.arange(BM)[:, None] >= own) & (tp.arange(BN)[None, :] >= 0))
                else:
                    tp.store(C[m0:m0 + BM, n0:n0 + BN], acc.T)
            else:                             # consumer 1: ring 1, the k-tiles 2j + 1
                acc = tp.zeros((BN, BM), tp.f32, layout=LC)
                for s in tp.static_range(STAGES - IN_FLIGHT):     # the ring's stages start released
                    if CLUSTER_M * CLUSTER_N > 1:
                        for q in tp.static_range(CLUSTER_M * CLUSTER_N):
                            tp.mbarrier_arrive(empty1[s], cta=q)
                    else:
                        tp.mbarrier_arrive(empty1[s])
                for j in range(pairs):
                    tp.mbarrier_wait(full1[j % STAGES], j // STAGES)
                    if B_NK:
                        acc = tp.mma_async(b_s1[j % STAGES], a_s1[j % STAGES].T, acc)
                    else:
                        acc = tp.mma_async(b_s1[j % STAGES].T, a_s1[j % STAGES].T, acc)
                    tp.mma_wait(IN_FLIGHT)
                    if CLUSTER_M * CLUSTER_N > 1:
                        for q in tp.static_range(CLUSTER_M * CLUSTER_N):
                            tp.mbarrier_arrive(empty1[(j + STAGES - IN_FLIGHT) % STAGES], cta=q)
                    else:
                        tp.mbarrier_arrive(empty1[(j + STAGES - IN_FLIGHT) % STAGES])   # pair j - IN_FLIGHT's: retired
                tp.mma_wait(0)
                tp.assert_tag(tp.mma_operands(acc), lambda b, a: b[1] == a[2])   # B's k is A's k
                tp.store(red, acc)                # handed to consumer 0
                tp.mbarrier_arrive(red_full)
        if CLUSTER_K > 1 and not PUSH:
            # every block's sum is in its `red`; rank 0's consumer 0 adds the other ranks' (distributed shared
            # memory) and stores C; the second barrier keeps them until it has read them
            tp.cluster_sync()
            if tp.block_id(2) == 0:
                if tp.warpgroup_id() == 1:
                    acc = tp.load(red, layout=LC) + tp.load(red, layout=LC, cta=1)    # (CLUSTER_K = 2)
                    if M_SHIFT:
                        tp.store(C[m0:m0 + BM, n0:n0 + BN], acc.T,
                                 mask=(m0 + tp.arange(BM)[:, None] >= own) & (tp.arange(BN)[None, :] >= 0))
                    else:
                        tp.store(C[m0:m0 + BM, n0:n0 + BN], acc.T)
            # (relaxed: no release, whose MEMBAR.ALL.GPU waited for C's stores, 0.6 us on an H100; the remote values
            # are stored above, so rank 0's reads have returned before it arrives)
            tp.cluster_sync(relaxed=True)
        if CLUSTER_M * CLUSTER_N > 1 and not RELAXED:
            tp.cluster_sync()           # no block leaves while another may still arrive on its mbarriers
    else:
        a_s = tp.shared((BM, BK), tp.bf16, stages=STAGES, swizzle=SWIZZLE)
        if B_NK:
            # B given as (N, K) (an nn.Linear weight, read in place): its (BN, BK) tile is K-major, the instruction's
            # A operand as it is (no transpose bit)
            b_s = tp.shared((BN, BK), tp.bf16, stages=STAGES, swizzle=SWIZZLE)
        else:
            b_s = tp.shared((BK, BN), tp.bf16, stages=STAGES, swizzle=SWIZZLE, layout=b_layout(BK, BN))
        full = tp.mbarrier(1, stages=STAGES)
        empty = tp.mbarrier(CLUSTER_M, stages=STAGES)    # with a cluster: the consumers of every block of it
        tp.tag(A, lambda i, k: ("A", i, k))
        if B_NK:
            tp.tag(B, lambda j, k: ("B", k, j))
        else:
            tp.tag(B, lambda k, j: ("B", k, j))
        if SPLIT_K > 1:
            z = tp.block_id(2)
            k_tiles = tp.cdiv(tp.cdiv(A.shape[1], BK), SPLIT_K)   # every split runs the same count (zeros past K)
            k_first = z * k_tiles
        else:                               # (no grid z: the verifier proves the blocks' C tiles disjoint)
            k_tiles = tp.cdiv(A.shape[1], BK)
            k_first = 0
        if CLUSTER_M > 1:
            tp.cluster_sync()               # every block's mbarriers are initialized before any other block uses them
        if tp.warpgroup_id() == 0:          # producer warpgroup: one thread issues the bulk tensor copies
            for k in range(k_tiles):
                if IN_FLIGHT == 0 and CLUSTER_M == 1:
                    if k >= STAGES:
                        tp.mbarrier_wait(empty[k % STAGES], k // STAGES - 1)
                else:                       # (the consumers pre-release the stages, in every block of a cluster)
                    tp.mbarrier_wait(empty[k % STAGES], k // STAGES)
                k0 = (k_first + k) * BK
                tp.copy_bulk(A[m0:m0 + BM, k0:k0 + BK], a_s[k % STAGES], full[k % STAGES])
                if CLUSTER_M > 1:
                    # the blocks of a cluster are adjacent row tiles of the same BN columns: B's tile, loaded once,
                    # lands in the same stage of every block (TMA multicast; the ranks take turns issuing it)
                    if B_NK:
                        tp.copy_bulk(B[n0:n0 + BN, k0:k0 + BK], b_s[k % STAGES], full[k % STAGES],
                                     multicast=(1 << CLUSTER_M) - 1, by=k % CLUSTER_M)
                    else:
                        tp.copy_bulk(B[k0:k0 + BK, n0:n0 + BN], b_s[k % STAGES], full[k % STAGES],
                                     multicast=(1 << CLUSTER_M) - 1, by=k % CLUSTER_M)
                elif B_NK:
                    tp.copy_bulk(B[n0:n0 + BN, k0:k0 + BK], b_s[k % STAGES], full[k % STAGES])
                else:
                    tp.copy_bulk(B[k0:k0 + BK, n0:n0 + BN], b_s[k % STAGES], full[k % STAGES])
                tp.mbarrier_arrive(full[k % STAGES])
        else:                               # consumer warpgroups: C^T's tile, B's tile as the instruction's A
            acc = tp.zeros((BN, BM), tp.f32, layout=LC)
            if IN_FLIGHT == 0:
                if CLUSTER_M > 1:
                    for s in tp.static_range(STAGES):      # every stage starts released, in every block
                        for r in tp.static_range(CLUSTER_M):
                            tp.mbarrier_arrive(empty[s], cta=r)
                for k in range(k_tiles):
                    tp.mbarrier_wait(full[k % STAGES], k // STAGES)
                    if B_NK:
                        acc = tp.mma(b_s[k % STAGES], a_s[k % STAGES].T, acc)
                    else:
                        acc = tp.mma(b_s[k % STAGES].T, a_s[k % STAGES].T, acc)
                    if CLUSTER_M > 1:
                        for r in tp.static_range(CLUSTER_M):       # released to every block that multicasts into it
                            tp.mbarrier_arrive(empty[k % STAGES], cta=r)
                    else:
                        tp.mbarrier_arrive(empty[k % STAGES])
            else:
                for s in tp.static_range(STAGES - 1):
                    if CLUSTER_M > 1:
                        for r in tp.static_range(CLUSTER_M):
                            tp.mbarrier_arrive(empty[s], cta=r)
                    else:
                        tp.mbarrier_arrive(empty[s])
                for k in range(k_tiles):
                    tp.mbarrier_wait(full[k % STAGES], k // STAGES)
                    if B_NK:
                        acc = tp.mma_async(b_s[k % STAGES], a_s[k % STAGES].T, acc)
                    else:
                        acc = tp.mma_async(b_s[k % STAGES].T, a_s[k % STAGES].T, acc)
                    tp.mma_wait(1)
                    if CLUSTER_M > 1:                      # tile k - 1's stage, in every block of the cluster
                        for r in tp.static_range(CLUSTER_M):
                            tp.mbarrier_arrive(empty[(k + STAGES - 1) % STAGES], cta=r)
                    else:
                        tp.mbarrier_arrive(empty[(k + STAGES - 1) % STAGES])   # tile k - 1's stage
                tp.mma_wait(0)
            tp.assert_tag(tp.mma_operands(acc), lambda b, a: b[1] == a[2])   # B's k is A's k
            if SPLIT_K > 1:
                mine = (z * tp.num_blocks(0) + tp.block_id(0)) * BM     # split z's slot
                tp.store(WS[mine:mine + BM, n0:n0 + BN], acc.T)
            else:
                tp.store(C[m0:m0 + BM, n0:n0 + BN], acc.T)      # unsplit: C itself, in C's dtype (WS, LOCKS unused)
        if CLUSTER_M > 1:
            tp.cluster_sync()               # no block leaves while another may still arrive on its mbarriers


gemm_splitk_swap_bf16 = gemm_splitk_swap.retyped(C=tp.Tensor[tp.bf16, "M", "N"])
gemm_splitk_swap_nk = gemm_splitk_swap.retyped(B=tp.Tensor[tp.bf16, "N", "K"])     # launch these with B_NK=1
gemm_splitk_swap_nk_bf16 = gemm_splitk_swap.retyped(B=tp.Tensor[tp.bf16, "N", "K"], C=tp.Tensor[tp.bf16, "M", "N"])
gemm_hopper.SWAP_KERNELS["gemm_splitk_swap"] = gemm_splitk_swap   # gemm_hopper.kernel_for(swap=True) picks it
