"""Warp-specialized Hopper GEMM C = A @ B (bf16 in, f32 accumulate; f32 or bf16 out), the CUTLASS 3 /
FlashAttention-3 shape:

* one producer warpgroup (warpgroup 0) streams A and B tiles with bulk tensor copies (TMA) into a ring of
  STAGES shared-memory stages; `full[s]` completes when stage s has landed (expect_tx on the bytes),
* CONSUMERS consumer warpgroups (warpgroups 1..) multiply each stage with wgmma (m64nBNk16) from shared-memory
  descriptors, each warpgroup owning 64 rows of the BM x BN tile, and release the stage through `empty[s]`.

Policies are the constexprs: tile (BM, BN, BK), stages, the instruction and the swizzles. A is staged
row-major (BM, BK) with the 128-byte swizzle (K-major for wgmma); B as BN / 64 column blocks of (BK, 64), each
row-major with the 128-byte swizzle (MN-major for wgmma: the descriptor's leading offset steps between blocks),
which is also what a TMA box of 64 columns writes. Tiles past M, N or K are zero-filled by the copies, so
ragged shapes need no masks until the final store.

The output dtype is the C tensor's: `gemm_hopper` writes f32, `gemm_hopper_bf16` (the same source retyped)
rounds the accumulator to bf16 in the epilogue's store; `launch` picks by c's dtype (or `out_dtype=`).

The epilogue is a policy too (EPILOGUE): 0 stores the accumulator from the registers; 1 stages it in a shared
tile c_s that the producer warpgroup copies out in coalesced 16-byte chunks; 2 stages it the same way and stores
c_s with a TMA store (`tp.store_bulk`, then `tp.store_bulk_wait` before the block exits). The consumers hand c_s
to the producer through an mbarrier (a handshake across roles, which the verifier orders).
"""

import numpy as np

import tilepy as tp


def _threads(c):
    return 128 * (1 + c["CONSUMERS"])


def _log2(n):
    return n.bit_length() - 1


def b_layout(BK, BN, atom=64):
    """(BK, BN) tile stored as BN // atom blocks of row-major (BK, atom): the wgmma MN-major canonical form."""
    return tp.Layout((BK, (atom, BN // atom)), (atom, (1, atom * BK)))


def _span_bits(row_bytes: int) -> int:
    """The TMA swizzle mode of rows of `row_bytes` (capped at 128): 3 for 128-byte rows, 2 for 64, 1 for 32."""
    return {32: 1, 64: 2}.get(min(row_bytes, 128), 3)


def _store_span(row_bytes: int, span: int) -> int:
    """The bytes of a store buffer's column block: `span` (gemm_persistent's STORE_SPAN) or, for 0, the piece's row
    capped at 128."""
    return span if span > 0 else min(row_bytes, 128)


def _lead(bn: int, store_n: int, bufs: int, held: int) -> int:
    """gemm_persistent DEFER: the pieces written at a tile's end (the rest held): all but HELD, or STORE_BUFS."""
    return bn // store_n - held if held > 0 else bufs


def _rows(consumers):
    """The rows of a (64 * consumers, N) wgmma accumulator as a 1-D register layout: thread l of a quad-row group
    holds rows l // 4 and l // 4 + 8 of its warp's 16 (the same layout as attention's row statistics)."""
    return tp.TVLayout((64 * consumers,), (4, 8, 4, consumers, 1), (2,), (((0, 1, 16, 64, 0), (8,)),), "wgmma.rows")


def _min_blocks(c):
    return c["MIN_BLOCKS"]


@tp.kernel(threads=_threads, target="sm_90a", min_blocks=_min_blocks)
def gemm_hopper(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"], C: tp.Tensor[tp.f32, "M", "N"],
                BM: tp.constexpr = 128, BN: tp.constexpr = 128, BK: tp.constexpr = 64, STAGES: tp.constexpr = 4,
                CONSUMERS: tp.constexpr = 2, INSTR: tp.constexpr = tp.nv.wgmma_m64n128k16_bf16,
                SWIZZLE: tp.constexpr = tp.Swizzle(3, 3, 3), IN_FLIGHT: tp.constexpr = 0,
                PRODUCER_REGS: tp.constexpr = 0, CONSUMER_REGS: tp.constexpr = 0, SPLIT_K: tp.constexpr = 1,
                B_SWIZZLE: tp.constexpr = 0, EPILOGUE: tp.constexpr = 0, MIN_BLOCKS: tp.constexpr = 0,
                B_NK: tp.constexpr = 0, GROUP_M: tp.constexpr = 0, TMA_ONLY: tp.constexpr = 0):
    if GROUP_M > 0:
        # grouped (L2-friendly) tile order: the blocks in launch order (x fastest) take GROUP_M row tiles at a time
        # down each column, so a wave reads a band of A's rows and of B's columns instead of all of A (a bijection
        # of the (x, y) grid onto itself for any grid; the last group may be short)
        pid = tp.block_id(0) + tp.num_blocks(0) * tp.block_id(1)
        in_group = GROUP_M * tp.num_blocks(1)
        first_m = (pid // in_group) * GROUP_M
        group_m = tp.minimum(tp.num_blocks(0) - first_m, GROUP_M)
        m0 = (first_m + (pid % in_group) % group_m) * BM
        n0 = ((pid % in_group) // group_m) * BN
    else:
        m0 = tp.block_id(0) * BM
        n0 = tp.block_id(1) * BN
    a_s = tp.shared((BM, BK), tp.bf16, stages=STAGES, swizzle=SWIZZLE)
    if B_NK:
        # B given as (N, K) (an nn.Linear weight, read in place: `gemm_hopper_nk`): the (BN, BK) tile staged
        # K-major with A's 128-byte swizzle, reaching the instruction as its transpose
        b_s = tp.shared((BN, BK), tp.bf16, stages=STAGES, swizzle=SWIZZLE)
    else:
        # B's column blocks are 64 wide (128-byte rows); a BN of 32 takes one block of 32 with the 64-byte swizzle
        b_s = tp.shared((BK, BN), tp.bf16, stages=STAGES, swizzle=B_SWIZZLE or SWIZZLE,
                        layout=b_layout(BK, BN, min(64, BN)))
    if EPILOGUE > 0 and SPLIT_K == 1:    # (split-K adds its partial tiles atomically from the registers)
        # The output tile staged in shared memory: the consumers write their accumulators into c_s, and the
        # producer warpgroup (idle by then) stores c_s in whole 16-byte chunks of consecutive columns instead
        # of the accumulator's column pairs 8 rows apart. The swizzle XORs a row's 8-element units with its row
        # (mod 8 for bf16: a warp's store is 8 rows x 16 bytes; mod 4 for f32: two wavefronts of 4 rows x 32
        # bytes), so the rows of one accumulator store hit distinct banks.
        if EPILOGUE == 1:
            c_s = tp.shared((BM, BN), C.dtype, swizzle=tp.Swizzle(min(4 - C.dtype.bytes // 2, _log2(BN) - 3), 3,
                                                                   _log2(BN) - 3))
        else:
            # EPILOGUE=2, the TMA store: c_s in column blocks of 128-byte rows with the 128-byte swizzle (what a
            # bulk tensor store reads), one `cp.async.bulk.tensor` per block, issued by the producer's first
            # thread; the 8 rows of one accumulator store still land in distinct 16-byte units (bf16)
            c_s = tp.shared((BM, BN), C.dtype, swizzle=tp.Swizzle(3, 4 - C.dtype.bytes // 2, 3),
                            layout=b_layout(BM, BN, 128 // C.dtype.bytes))
        staged = tp.mbarrier(1)
    # full[s]: the producer's copies into stage s landed; empty[s]: the consumers are done reading stage s.
    # Tile k lives in stage k % STAGES; its round k // STAGES is the phase of both mbarriers.
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    tp.tag(A, lambda i, k: ("A", i, k))
    if B_NK:
        tp.tag(B, lambda j, k: ("B", k, j))
    else:
        tp.tag(B, lambda k, j: ("B", k, j))
    LC = tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1))   # the accumulator's layout (also an epilogue's)
    if SPLIT_K > 1:
        # split-K: block z sums k-tiles [k_first, k_first + k_tiles) and adds its partial tile into C (zeroed
        # by the caller) with f32 atomics; tiles past K read zeros (the copies zero-fill), so every split runs
        # the same count
        k_tiles = tp.cdiv(tp.cdiv(A.shape[1], BK), SPLIT_K)
        k_first = tp.block_id(2) * k_tiles
    else:
        k_first = 0
        k_tiles = tp.cdiv(A.shape[1], BK)
    if tp.warpgroup_id() == 0:          # producer warpgroup: one thread issues the bulk tensor copies
        if PRODUCER_REGS > 0:
            tp.setmaxnreg(PRODUCER_REGS)
        for k in range(k_tiles):
            if IN_FLIGHT == 0:
                if k >= STAGES:
                    tp.mbarrier_wait(empty[k % STAGES], k // STAGES - 1)   # tile k - STAGES was released
            else:
                tp.mbarrier_wait(empty[k % STAGES], k // STAGES)       # (the consumers pre-release every stage)
            k0 = (k_first + k) * BK
            # TMA_ONLY=1: no per-element copy compiled in beside the bulk copies (ptxas sized the whole block's
            # registers for it); `launch` drops it where an operand's base is not 16-byte aligned
            tp.copy_bulk(A[m0:m0 + BM, k0:k0 + BK], a_s[k % STAGES], full[k % STAGES], fallback=TMA_ONLY == 0)
            if B_NK:
                tp.copy_bulk(B[n0:n0 + BN, k0:k0 + BK], b_s[k % STAGES], full[k % STAGES], fallback=TMA_ONLY == 0)
            else:
                tp.copy_bulk(B[k0:k0 + BK, n0:n0 + BN], b_s[k % STAGES], full[k % STAGES], fallback=TMA_ONLY == 0)
            tp.mbarrier_arrive(full[k % STAGES])
        if EPILOGUE > 0 and SPLIT_K == 1:
            tp.mbarrier_wait(staged, 0)                # the consumers' accumulators are in c_s
            if EPILOGUE == 1:
                tp.copy(c_s, C[m0:m0 + BM, n0:n0 + BN])    # shared -> global, coalesced
            else:
                tp.store_bulk(c_s, C[m0:m0 + BM, n0:n0 + BN])  # TMA store (rows past M / N are not written)
                tp.store_bulk_wait(c_s)                 # c_s is read before the block exits
    else:                               # consumer warpgroups: wgmma over their own threads, 64 rows each
        if CONSUMER_REGS > 0:
            tp.setmaxnreg(CONSUMER_REGS)
        acc = tp.zeros((BM, BN), tp.f32, layout=LC)
        if IN_FLIGHT == 0:
            for k in range(k_tiles):
                tp.mbarrier_wait(full[k % STAGES], k // STAGES)        # stage k % STAGES holds tile k
                if B_NK:
                    acc = tp.mma(a_s[k % STAGES], b_s[k % STAGES].T, acc)
                else:
                    acc = tp.mma(a_s[k % STAGES], b_s[k % STAGES], acc)
                tp.mbarrier_arrive(empty[k % STAGES])
        else:
            # One wgmma group stays in flight while the next tile lands: tile k's group is issued, then
            # wait_group 1 retires tile k - 1's, and only then is tile k - 1's stage released. Every stage but
            # the last is released once up front, and iteration 0 releases the last, so the producer's wait for
            # tile k is phase k // STAGES of empty[k % STAGES] with no first-round special case.
            for s in tp.static_range(STAGES - 1):
                tp.mbarrier_arrive(empty[s])
            for k in range(k_tiles):
                tp.mbarrier_wait(full[k % STAGES], k // STAGES)
                if B_NK:
                    acc = tp.mma_async(a_s[k % STAGES], b_s[k % STAGES].T, acc)
                else:
                    acc = tp.mma_async(a_s[k % STAGES], b_s[k % STAGES], acc)
                tp.mma_wait(1)
                tp.mbarrier_arrive(empty[(k + STAGES - 1) % STAGES])   # tile k - 1's stage
            tp.mma_wait(0)
        tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
        if SPLIT_K > 1:
            tp.atomic_add(C[m0:m0 + BM, n0:n0 + BN], acc)
        elif EPILOGUE > 0:
            tp.store(c_s, acc)   # EPILOGUE (registers -> shared, rounded to C's dtype; a lowering may fuse here)
            tp.mbarrier_arrive(staged)                 # the producer warpgroup stores it
        else:
            tp.store(C[m0:m0 + BM, n0:n0 + BN], acc)   # EPILOGUE (a lowering may fuse a pointwise chain here)


gemm_hopper_bf16 = gemm_hopper.retyped(C=tp.Tensor[tp.bf16, "M", "N"])  # bf16 out: tp.store rounds
# B given as (N, K) (c = a @ b.T, F.linear's weight read in place): launch these with B_NK=1
gemm_hopper_nk = gemm_hopper.retyped(B=tp.Tensor[tp.bf16, "N", "K"])
gemm_hopper_nk_bf16 = gemm_hopper.retyped(B=tp.Tensor[tp.bf16, "N", "K"], C=tp.Tensor[tp.bf16, "M", "N"])


@tp.kernel(threads=_threads, target="sm_90a", min_blocks=_min_blocks)
def gemm_splitk(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"], C: tp.Tensor[tp.f32, "M", "N"],
                WS: tp.Tensor[tp.f32, "WR", "WC"], LOCKS: tp.Tensor[tp.i32, "T"],
                BM: tp.constexpr = 64, BN: tp.constexpr = 128, BK: tp.constexpr = 64, STAGES: tp.constexpr = 6,
                CONSUMERS: tp.constexpr = 1, INSTR: tp.constexpr = tp.nv.wgmma_m64n128k16_bf16,
                SWIZZLE: tp.constexpr = tp.Swizzle(3, 3, 3), IN_FLIGHT: tp.constexpr = 1,
                PRODUCER_REGS: tp.constexpr = 0, CONSUMER_REGS: tp.constexpr = 0, SPLIT_K: tp.constexpr = 4,
                B_SWIZZLE: tp.constexpr = 0, FIXUP: tp.constexpr = 2, MIN_BLOCKS: tp.constexpr = 0,
                SLOT_ROWS: tp.constexpr = 0, TMA_ONLY: tp.constexpr = 0):
    """gemm_hopper's split-K with the reduction in the kernel: no zeroing pass before it and no rounding pass
    after it. Block (i, j, z) sums its share of the k-tiles of output tile t = i * grid_y + j (as gemm_hopper's
    SPLIT_K) and puts the partial tile in an f32 workspace, then takes a ticket on LOCKS[t] (an acq_rel atomic:
    a device-scope fence before it orders every thread's writes, one after it the reads that follow). The
    block whose ticket is SPLIT_K - 1 arrived last, after every other part was written: only it (masks on
    the ticket) completes the tile, stores C in C's dtype (the bf16 rounding in this epilogue) and resets
    the ticket and what it used of the workspace, so the next call finds them as the first did.

    FIXUP=1: the parts are added into WS (M, N) with f32 atomics; the last block loads the sum and zeroes it.
    FIXUP=2: part z is stored into its own slot of WS (SPLIT_K * grid_x * BM, N), rows (z * grid_x + i) * BM
    (plain stores, nothing to zero); the last block adds the other SPLIT_K - 1 slots to its accumulator.
    FIXUP=3: the slots of FIXUP=2 and nothing else (no ticket, C not written): `splitk_sum`, launched after it,
    adds them up and rounds once. No block depends on another here, so every verifier check proves it.

    The grid must hold every block at once or not (a block never waits for another: the last to arrive does
    the work), so any grid size is safe. The last arriver is the one whose ticket is num_blocks(2) - 1 (the
    launch's grid z is SPLIT_K): counted over the grid, the verifier's ticket protocol (global_race) proves each
    part ordered before the fix-up, and every other check proves the ring, bounds and tags."""
    m0 = tp.block_id(0) * BM
    n0 = tp.block_id(1) * BN
    z = tp.block_id(2)
    a_s = tp.shared((BM, BK), tp.bf16, stages=STAGES, swizzle=SWIZZLE)
    b_s = tp.shared((BK, BN), tp.bf16, stages=STAGES, swizzle=B_SWIZZLE or SWIZZLE,
                    layout=b_layout(BK, BN, min(64, BN)))
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda k, j: ("B", k, j))
    k_tiles = tp.cdiv(tp.cdiv(A.shape[1], BK), SPLIT_K)   # every split runs the same count (zeros past K)
    k_first = z * k_tiles
    LC = tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1))   # the accumulator's layout (the fix-up's loads too)
    if tp.warpgroup_id() == 0:          # producer warpgroup: one thread issues the bulk tensor copies
        if PRODUCER_REGS > 0:
            tp.setmaxnreg(PRODUCER_REGS)
        for k in range(k_tiles):
            if IN_FLIGHT == 0:
                if k >= STAGES:
                    tp.mbarrier_wait(empty[k % STAGES], k // STAGES - 1)
            else:
                tp.mbarrier_wait(empty[k % STAGES], k // STAGES)
            k0 = (k_first + k) * BK
            tp.copy_bulk(A[m0:m0 + BM, k0:k0 + BK], a_s[k % STAGES], full[k % STAGES], fallback=TMA_ONLY == 0)
            tp.copy_bulk(B[k0:k0 + BK, n0:n0 + BN], b_s[k % STAGES], full[k % STAGES], fallback=TMA_ONLY == 0)
            tp.mbarrier_arrive(full[k % STAGES])
    else:                               # consumer warpgroups: wgmma over their own threads, 64 rows each
        if CONSUMER_REGS > 0:
            tp.setmaxnreg(CONSUMER_REGS)
        acc = tp.zeros((BM, BN), tp.f32, layout=LC)
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
        tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
        t = tp.block_id(0) * tp.num_blocks(1) + tp.block_id(1)     # the output tile's ticket
        if FIXUP == 1:
            tp.atomic_add(WS[m0:m0 + BM, n0:n0 + BN], acc)
            ticket = tp.atomic_add(LOCKS[t:t + 1], 1, sem="acq_rel")
            last = ticket == tp.num_blocks(2) - 1      # (1,): every other part is in WS (grid z = SPLIT_K)
            whole = tp.load(WS[m0:m0 + BM, n0:n0 + BN], mask=last[:, None], layout=LC)
            tp.store(C[m0:m0 + BM, n0:n0 + BN], whole, mask=last[:, None])
            tp.store(WS[m0:m0 + BM, n0:n0 + BN], 0.0, mask=last[:, None])   # zero again for the next call
            tp.store(LOCKS[t:t + 1], 0, mask=last)     # ready for the next call
        elif FIXUP == 3:                               # the slot alone: splitk_sum adds them up afterwards
            mine = (z * tp.num_blocks(0) + tp.block_id(0)) * BM
            if SLOT_ROWS:
                # only the rows below M (a 16-row decode's 64-row slot is three quarters padding, which
                # splitk_sum never reads)
                rows = m0 + tp.arange(BM, layout=_rows(CONSUMERS))
                tp.store(WS[mine:mine + BM, n0:n0 + BN], acc, mask=(rows < A.shape[0])[:, None])
            else:
                tp.store(WS[mine:mine + BM, n0:n0 + BN], acc)
        else:
            mine = (z * tp.num_blocks(0) + tp.block_id(0)) * BM
            tp.store(WS[mine:mine + BM, n0:n0 + BN], acc)
            ticket = tp.atomic_add(LOCKS[t:t + 1], 1, sem="acq_rel")
            last = ticket == tp.num_blocks(2) - 1      # (1,): every other part is in its slot (grid z = SPLIT_K)
            for q in tp.static_range(SPLIT_K):         # the other splits' parts
                theirs = (q * tp.num_blocks(0) + tp.block_id(0)) * BM
                acc += tp.load(WS[theirs:theirs + BM, n0:n0 + BN], mask=(last & (q != z))[:, None], layout=LC)
            tp.store(C[m0:m0 + BM, n0:n0 + BN], acc, mask=last[:, None])
            tp.store(LOCKS[t:t + 1], 0, mask=last)     # ready for the next call


gemm_splitk_bf16 = gemm_splitk.retyped(C=tp.Tensor[tp.bf16, "M", "N"])  # bf16 out: the last block's store rounds


@tp.kernel(threads=128)
def splitk_sum(WS: tp.Tensor[tp.f32, "WR", "N"], C: tp.Tensor[tp.f32, "M", "N"], SPLIT_K: tp.constexpr = 4,
               BR: tp.constexpr = 8, BC: tp.constexpr = 128):
    """C = the sum of gemm_splitk's FIXUP=3 slots, rounded once to C's dtype: WS holds SPLIT_K slots of
    WR / SPLIT_K >= M rows each (slot q's rows [q * WR / SPLIT_K, ...)). Grid (cdiv(M, BR), cdiv(N, BC)). A block's
    rows past M read the next slot's rows (or zeros past WS) and are not stored (C's bounds)."""
    r0 = tp.block_id(0) * BR
    c0 = tp.block_id(1) * BC
    rows = WS.shape[0] // SPLIT_K
    acc = tp.load(WS[r0:r0 + BR, c0:c0 + BC])
    for q in tp.static_range(1, SPLIT_K):
        acc += tp.load(WS[q * rows + r0:q * rows + r0 + BR, c0:c0 + BC])
    tp.store(C[r0:r0 + BR, c0:c0 + BC], acc)


splitk_sum_bf16 = splitk_sum.retyped(C=tp.Tensor[tp.bf16, "M", "N"])


def _cluster(c):
    return (c["CLUSTER_M"], 1, 1)


@tp.kernel(threads=_threads, target="sm_90a", cluster=_cluster)
def gemm_cluster(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"], C: tp.Tensor[tp.f32, "M", "N"],
                 BM: tp.constexpr = 128, BN: tp.constexpr = 256, BK: tp.constexpr = 64, STAGES: tp.constexpr = 4,
                 CONSUMERS: tp.constexpr = 2, INSTR: tp.constexpr = tp.nv.wgmma_m64n256k16_bf16,
                 SWIZZLE: tp.constexpr = tp.Swizzle(3, 3, 3), PRODUCER_REGS: tp.constexpr = 0,
                 CONSUMER_REGS: tp.constexpr = 0, EPILOGUE: tp.constexpr = 0, CLUSTER_M: tp.constexpr = 2,
                 MULTICAST: tp.constexpr = True, RELAXED: tp.constexpr = 0, TMA_ONLY: tp.constexpr = 0):
    """gemm_hopper on thread-block clusters of CLUSTER_M blocks along M: the blocks of a cluster compute
    vertically adjacent output tiles (the same columns n0), so they share B's tile of every k-step. It is loaded
    once per cluster with a TMA multicast (issued by rank k % CLUSTER_M, taking turns) into the same stage of
    every block, which halves (at 2) the L2 -> SM traffic of B. A stage is refilled only when the consumers of
    EVERY block of the cluster have released it: `empty[s]` counts CLUSTER_M arrivals, and each block's consumers
    arrive on `empty[s]` of every block (remote arrivals), so each producer's wait covers all the readers its
    multicast writes into. `full[s]` of each block expects A's tile and B's tile (its own copy and the
    multicast). The cluster barrier at the start publishes every block's mbarrier initialization before any
    remote arrival or multicast; the one at the end keeps a block's shared memory alive until the others are
    done arriving on it. EPILOGUE 0 (registers -> C) or 2 (TMA store through a staged tile), as gemm_hopper.

    RELAXED=1 (G22): neither cluster barrier carries release / acquire, whose MEMBAR.ALL.GPU cost 1.2 us of the
    form's 1.5 us per launch over the unclustered kernel (H100, 1024 x 1024 x 64: 4.74 -> 3.50 us device). The
    opening one is an execution barrier (`tp.mbarrier`'s initialization is fenced at cluster scope, so it publishes
    the inits: CUTLASS's arrive_relaxed / wait); the closing one is replaced by the producer's tail: after its last
    copy it waits on every stage of `empty` for one more phase, i.e. until the consumers of EVERY block have released
    every stage it filled. Those releases are the only remote writes into a block (a multicast into it completes on
    its own `full`, which its consumers wait for), so once the tail has seen them the block may exit. The tail comes
    before the producer's epilogue (TMA store): placed after it, it cost 0.5-1.4 us (1024 x 1024 x K, K = 64-4096;
    the same as a relaxed closing barrier once moved)."""
    m0 = tp.block_id(0) * BM
    n0 = tp.block_id(1) * BN
    a_s = tp.shared((BM, BK), tp.bf16, stages=STAGES, swizzle=SWIZZLE)
    b_s = tp.shared((BK, BN), tp.bf16, stages=STAGES, swizzle=SWIZZLE, layout=b_layout(BK, BN, min(64, BN)))
    if EPILOGUE > 0:
        c_s = tp.shared((BM, BN), C.dtype, swizzle=tp.Swizzle(3, 4 - C.dtype.bytes // 2, 3),
                        layout=b_layout(BM, BN, 128 // C.dtype.bytes))
        staged = tp.mbarrier(1)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(CLUSTER_M, stages=STAGES)    # the consumers of every block of the cluster
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda k, j: ("B", k, j))
    k_tiles = tp.cdiv(A.shape[1], BK)
    # every block's mbarriers are initialized before any other block uses them
    tp.cluster_sync(relaxed=RELAXED == 1)
    if tp.warpgroup_id() == 0:          # producer warpgroup: one thread issues the bulk tensor copies
        if PRODUCER_REGS > 0:
            tp.setmaxnreg(PRODUCER_REGS)
        for k in range(k_tiles):
            tp.mbarrier_wait(empty[k % STAGES], k // STAGES)    # every block's consumers released the stage
            k0 = k * BK
            tp.copy_bulk(A[m0:m0 + BM, k0:k0 + BK], a_s[k % STAGES], full[k % STAGES], fallback=TMA_ONLY == 0)
            if MULTICAST:
                tp.copy_bulk(B[k0:k0 + BK, n0:n0 + BN], b_s[k % STAGES], full[k % STAGES],
                             multicast=(1 << CLUSTER_M) - 1, by=k % CLUSTER_M, fallback=TMA_ONLY == 0)
            else:                       # (ablation: every block loads its own B; the releases stay cluster-wide)
                tp.copy_bulk(B[k0:k0 + BK, n0:n0 + BN], b_s[k % STAGES], full[k % STAGES], fallback=TMA_ONLY == 0)
            tp.mbarrier_arrive(full[k % STAGES])
        if RELAXED:
            # the tail: every block's consumers released every stage this block filled (the last remote arrivals
            # on its mbarriers): wait k_tiles .. k_tiles + STAGES - 1, as the loop would before its next copies.
            # Before the epilogue: it waits while the consumers stage c_s (after it, the store: 0.5-1.4 us slower)
            for k in range(k_tiles + STAGES):
                if k >= k_tiles:
                    tp.mbarrier_wait(empty[k % STAGES], k // STAGES)
        if EPILOGUE > 0:
            tp.mbarrier_wait(staged, 0)                # the consumers' accumulators are in c_s
            tp.store_bulk(c_s, C[m0:m0 + BM, n0:n0 + BN])
            tp.store_bulk_wait(c_s)
    else:                               # consumer warpgroups: wgmma over their own threads, 64 rows each
        if CONSUMER_REGS > 0:
            tp.setmaxnreg(CONSUMER_REGS)
        for s in tp.static_range(STAGES):          # every stage starts released, in every block of the cluster
            for r in tp.static_range(CLUSTER_M):
                tp.mbarrier_arrive(empty[s], cta=r)
        acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1)))
        for k in range(k_tiles):
            tp.mbarrier_wait(full[k % STAGES], k // STAGES)        # stage k % STAGES holds tile k
            acc = tp.mma(a_s[k % STAGES], b_s[k % STAGES], acc)
            for r in tp.static_range(CLUSTER_M):                    # released to every block that multicasts
                tp.mbarrier_arrive(empty[k % STAGES], cta=r)
        tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
        if EPILOGUE > 0:
            tp.store(c_s, acc)
            tp.mbarrier_arrive(staged)
        else:
            tp.store(C[m0:m0 + BM, n0:n0 + BN], acc)
    if not RELAXED:
        tp.cluster_sync()               # no block leaves while another may still arrive on its mbarriers


gemm_cluster_bf16 = gemm_cluster.retyped(C=tp.Tensor[tp.bf16, "M", "N"])


@tp.kernel(threads=_threads, target="sm_90a")
def gemm_persistent(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"],
                    C: tp.Tensor[tp.f32, "M", "N"],
                    BM: tp.constexpr = 128, BN: tp.constexpr = 256, BK: tp.constexpr = 64, STAGES: tp.constexpr = 4,
                    CONSUMERS: tp.constexpr = 2, INSTR: tp.constexpr = tp.nv.wgmma_m64n256k16_bf16,
                    SWIZZLE: tp.constexpr = tp.Swizzle(3, 3, 3), PRODUCER_REGS: tp.constexpr = 0,
                    CONSUMER_REGS: tp.constexpr = 0, GROUP_M: tp.constexpr = 8, EPILOGUE: tp.constexpr = 0,
                    STORE_N: tp.constexpr = 0, STORE_BUFS: tp.constexpr = 2, DEFER: tp.constexpr = 0,
                    STORE_SPAN: tp.constexpr = 0, HELD: tp.constexpr = 0, STORE_LOOP: tp.constexpr = 0,
                    TMA_ONLY: tp.constexpr = 0):
    """gemm_hopper on a persistent grid: a 1-D grid of at most one block per SM, block b walking output tiles
    b, b + grid, ... in a grouped (L2-friendly) order, GROUP_M row tiles sweeping the columns together. The
    ring runs on across a block's output tiles, so the producer loads the next output tile's stages while the
    consumers store this one's accumulator (the epilogue and the next tile's fill overlap).

    Each output tile takes `rounds` whole turns of the ring (k-tiles rounded up to a multiple of STAGES; a
    slot past the last k-tile carries no copy and no product, only its two arrivals), so the k-th slot of a
    block's it-th tile is stage k % STAGES in phase it * rounds + k // STAGES of both mbarriers. The consumers
    release every stage once up front, so the producer's wait has no first-turn case. The verifier proves this
    form clean (it writes the tile and ring loops as one loop over the block's slots before the analysis:
    tilepy_verify/mbarrier_arrays.py, tests/stdlib/test_gemm_hopper.py::test_persistent_verifies, seeded bugs
    in tests/verify/test_persistent_nested.py); gemm_persistent_flat below is the same GEMM written as that one
    loop per role, slower on the H100.

    EPILOGUE=2, the TMA store overlapped with the next tile (cuBLAS's persistent kernels store so): the consumers
    write a tile's accumulator into c_s (gemm_hopper's EPILOGUE=2 layout), arrive on `staged` and go straight on to
    the next tile's ring; the producer, once it has issued the next tile's copies, stores c_s with a bulk tensor
    store, waits for its read and hands c_s back through `c_free`, which the consumers wait for before writing the
    next tile into it (a tile's store goes out one tile late; the block's last tile after the loop). The block's
    it-th tile's handshake is phase it of `staged` and of `c_free`. The store is TMA only (fallback=False: the
    per-element copy beside it spilled 2.7-5.3 KB of the producer's registers), so C's rows must be 16-byte
    multiples (the launch refuses others).

    STORE_N (EPILOGUE=2; 0: the whole tile at once, as above): the tile goes out in BN // STORE_N column pieces
    (an even number) through two (BM, STORE_N) buffers, cuBLAS's structure (a 16 KB store buffer beside 4 stages
    of 48 KB, where the whole 64 KB tile leaves room for 3). The consumers write piece p (acc[:, p * STORE_N:...],
    a register-local column window) into buffer p % 2 and arrive on staged[p % 2]; a store warp (the producer
    warpgroup's last warp; the copies are issued by its first) walks the block's tiles beside the ring, stores each
    piece as it is staged, waits for its read and hands the buffer back through c_free[p % 2], which the consumers
    wait for before writing the buffer again: the two buffers alternate between the consumers' writes and the
    TMA's reads while the producer keeps the ring full with the next tile's stages. The j-th use of a buffer in a
    block (piece p of the block's it-th tile: j = it * BN // (2 * STORE_N) + p // 2) is phase j of its staged and
    c_free. (Servicing the pieces from the producer's ring loop instead, at its STAGES-th slot, was correct on the
    interpreter but beyond the verifier: a handshake under `k == STAGES - 1` in the ring.) The loads are TMA only
    there (fallback=False): the per-row copy compiled beside them spilled the 64-register producer (224 bytes).
    STORE_BUFS (default 2) generalizes the two buffers: piece p uses buffer p % STORE_BUFS, its j-th use being
    j = it * BN // (STORE_BUFS * STORE_N) + p // STORE_BUFS; pieces under 128 bytes a row (STORE_N=32 for bf16)
    take the swizzle of their span (64 bytes: tp.Swizzle(2, 3, 3)).
    STORE_SPAN (bytes, 32 / 64 / 128; 0: a piece's row, at most 128): a buffer as column blocks of rows that wide,
    each block one TMA box of its own. For f32 out (G18): the accumulator's 8-byte pairs land four to a row, so a
    half-warp's 8-byte writes cover four rows x 32 bytes; in 128-byte swizzled rows those are two 16-byte chunks a
    row that the XOR maps onto the same banks in rows 2i and 2i + 1 (a 2-way conflict); in 32-byte blocks the four
    rows are 128 consecutive bytes (conflict-free), at four TMA stores a piece of 32 columns.

    DEFER=1 (STORE_N > 0): the pieces that would wait inside the tile for a buffer's read (p >= STORE_BUFS) are
    rounded to C's dtype and held in registers (a (BM, BN - STORE_BUFS * STORE_N) tile, 32 registers a thread at
    128 x 256 bf16), and written during the next tile's first k-tile: its wgmma is issued asynchronously, the held
    pieces go into the buffers as their reads complete, then the wgmma is waited for. The tensor cores work through
    the store's round trip instead of idling at the tile's end; a tile's pieces still go out in order 0, 1, ... (the
    store warp is unchanged), the last tile's held pieces after the loop. The first k-tile is taken out of the ring
    loop (every tile has one: k_tiles at least 1, K = 0 multiplying one k-tile of zeros: without it the prologue
    waited on full[0] for a copy never issued, the deadlock tilepy-verify reported); the held pieces' `staged`
    arrivals wait for that wgmma to retire. Verified clean since 8d53c5d (the ring flattened from k = 1). DEFER=2 is
    the same schedule with the ring loop whole from slot 0 (slot 0's wait repeated, its mma skipped there; k_tiles
    at least 1): one ring loop per tile, the form the verifier's ring flattening takes, and proves: the prologue's wait
    on full[0] is a second wait op on it beside the ring's, and the read sees the copies of the higher phase
    (reaching.cross_role); `turn` is written as the tile's first slot, ((t - first) // step) * rounds, which the
    flattening turns into a linear count (benchmarks/NOTES.md, V11).
    HELD (DEFER > 0; 0: the pieces from STORE_BUFS on, half the tile): how many of the tile's last pieces are held
    (1 .. BN // STORE_N - STORE_BUFS); the pieces before them go out at the tile's end, those past the first
    STORE_BUFS each waiting for its buffer's previous read as without DEFER. For f32 out (G26), where half a tile is
    64 more registers: one buffer of 64 columns (STORE_BUFS=1), piece 3 held (32 registers) or pieces 2 and 3.
    STORE_LOOP=1 (STORE_N > 0): the store warp walks a tile's pieces in a run-time loop instead of unrolling them: one
    TMA store of c_s in the program, so the verifier's race check pairs each piece write with one store (BN // STORE_N
    unrolled): 2-4x faster to verify (G26: 8 pieces of 32 with HELD=2 4.2 -> 1.0 s CPU), the same schedule."""
    a_s = tp.shared((BM, BK), tp.bf16, stages=STAGES, swizzle=SWIZZLE)
    b_s = tp.shared((BK, BN), tp.bf16, stages=STAGES, swizzle=SWIZZLE, layout=b_layout(BK, BN))
    if EPILOGUE == 2 and STORE_N == 0:
        c_s = tp.shared((BM, BN), C.dtype, swizzle=tp.Swizzle(3, 4 - C.dtype.bytes // 2, 3),
                        layout=b_layout(BM, BN, 128 // C.dtype.bytes))
        staged = tp.mbarrier(1)     # the consumers' tile it is in c_s (phase it)
        c_free = tp.mbarrier(1)     # the store of tile it has read c_s (phase it)
    if EPILOGUE == 2 and STORE_N > 0:
        # STORE_BUFS buffers of (BM, STORE_N): rows of min(STORE_N, 128 bytes) under the swizzle of that span
        c_s = tp.shared((BM, STORE_N), C.dtype, stages=STORE_BUFS,
                        swizzle=tp.Swizzle(_span_bits(_store_span(STORE_N * C.dtype.bytes, STORE_SPAN)),
                                           4 - C.dtype.bytes // 2, 3),
                        layout=b_layout(BM, STORE_N, _store_span(STORE_N * C.dtype.bytes, STORE_SPAN) // C.dtype.bytes))
        staged = tp.mbarrier(1, stages=STORE_BUFS)     # buffer b holds the piece of its j-th use (phase j)
        c_free = tp.mbarrier(1, stages=STORE_BUFS)     # the store of that piece has read buffer b (phase j)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda k, j: ("B", k, j))
    n_m = tp.cdiv(C.shape[0], BM)
    n_n = tp.cdiv(C.shape[1], BN)
    in_group = GROUP_M * n_n                       # output tiles per group of GROUP_M tile rows
    k_tiles = tp.cdiv(A.shape[1], BK)
    if DEFER:       # k-tile 0 is multiplied before the ring: every tile has one (DEFER=1 with K = 0 deadlocked)
        k_tiles = tp.maximum(k_tiles, 1)
    rounds = tp.cdiv(k_tiles, STAGES)
    first = tp.block_id(0)
    step = tp.num_blocks(0)
    if tp.warpgroup_id() == 0:          # producer warpgroup: one thread issues the bulk tensor copies
        if PRODUCER_REGS > 0:
            tp.setmaxnreg(PRODUCER_REGS)
        if STORE_N > 0:
            if tp.warp_id() < 3:        # warps 0-2: the copies (TMA only: the per-row copy beside them spilled)
                for t in range(first, n_m * n_n, step):
                    first_m = (t // in_group) * GROUP_M
                    group_m = tp.minimum(n_m - first_m, GROUP_M)
                    m0 = (first_m + (t % in_group) % group_m) * BM
                    n0 = ((t % in_group) // group_m) * BN
                    turn = ((t - first) // step) * rounds
                    for k in range(rounds * STAGES):
                        tp.mbarrier_wait(empty[k % STAGES], turn + k // STAGES)
                        if k < k_tiles:
                            tp.copy_bulk(A[m0:m0 + BM, k * BK:k * BK + BK], a_s[k % STAGES], full[k % STAGES],
                                         fallback=False)
                            tp.copy_bulk(B[k * BK:k * BK + BK, n0:n0 + BN], b_s[k % STAGES], full[k % STAGES],
                                         fallback=False)
                        tp.mbarrier_arrive(full[k % STAGES])
            else:                       # warp 3: the store warp, the block's tiles piece by piece
                for t in range(first, n_m * n_n, step):
                    first_m = (t // in_group) * GROUP_M
                    group_m = tp.minimum(n_m - first_m, GROUP_M)
                    m0 = (first_m + (t % in_group) % group_m) * BM
                    n0 = ((t % in_group) // group_m) * BN
                    it = (t - first) // step
                    if STORE_LOOP:      # the pieces in a run-time loop: one store site (verified 2-4x faster)
                        for p in range(BN // STORE_N):
                            tp.mbarrier_wait(staged[p % STORE_BUFS],        # the consumers staged piece p
                                             it * (BN // (STORE_BUFS * STORE_N)) + p // STORE_BUFS)
                            tp.store_bulk(c_s[p % STORE_BUFS],
                                          C[m0:m0 + BM, n0 + p * STORE_N:n0 + p * STORE_N + STORE_N], fallback=False)
                            tp.store_bulk_wait(c_s[p % STORE_BUFS])
                            tp.mbarrier_arrive(c_free[p % STORE_BUFS])
                    else:
                        for p in tp.static_range(BN // STORE_N):
                            tp.mbarrier_wait(staged[p % STORE_BUFS],
                                             it * (BN // (STORE_BUFS * STORE_N)) + p // STORE_BUFS)
                            tp.store_bulk(c_s[p % STORE_BUFS],
                                          C[m0:m0 + BM, n0 + p * STORE_N:n0 + p * STORE_N + STORE_N], fallback=False)
                            tp.store_bulk_wait(c_s[p % STORE_BUFS])     # read: the consumers may write it again
                            tp.mbarrier_arrive(c_free[p % STORE_BUFS])
        else:       # the whole tile: the producer warpgroup copies and stores (the form before STORE_N)
            for t in range(first, n_m * n_n, step):
                first_m = (t // in_group) * GROUP_M
                group_m = tp.minimum(n_m - first_m, GROUP_M)          # the last group may be short
                m0 = (first_m + (t % in_group) % group_m) * BM
                n0 = ((t % in_group) // group_m) * BN
                turn = ((t - first) // step) * rounds     # ring turns taken by the earlier tiles of this block
                for k in range(rounds * STAGES):
                    tp.mbarrier_wait(empty[k % STAGES], turn + k // STAGES)   # the consumers released the stage
                    if k < k_tiles:
                        tp.copy_bulk(A[m0:m0 + BM, k * BK:k * BK + BK], a_s[k % STAGES], full[k % STAGES],
                                     fallback=TMA_ONLY == 0)
                        tp.copy_bulk(B[k * BK:k * BK + BK, n0:n0 + BN], b_s[k % STAGES], full[k % STAGES],
                                     fallback=TMA_ONLY == 0)
                    tp.mbarrier_arrive(full[k % STAGES])
                if EPILOGUE == 2:
                    it = (t - first) // step
                    if it > 0:                  # the previous tile, staged while this tile's ring filled
                        pt = t - step
                        p_first_m = (pt // in_group) * GROUP_M
                        p_group_m = tp.minimum(n_m - p_first_m, GROUP_M)
                        pm0 = (p_first_m + (pt % in_group) % p_group_m) * BM
                        pn0 = ((pt % in_group) // p_group_m) * BN
                        tp.mbarrier_wait(staged, it - 1)
                        tp.store_bulk(c_s, C[pm0:pm0 + BM, pn0:pn0 + BN], fallback=False)
                        tp.store_bulk_wait(c_s)             # c_s read: the consumers may write the next tile
                        tp.mbarrier_arrive(c_free)
            if EPILOGUE == 2:                   # the block's last tile
                mine = tp.cdiv(n_m * n_n - first, step)
                lt = first + (mine - 1) * step
                l_first_m = (lt // in_group) * GROUP_M
                l_group_m = tp.minimum(n_m - l_first_m, GROUP_M)
                lm0 = (l_first_m + (lt % in_group) % l_group_m) * BM
                ln0 = ((lt % in_group) // l_group_m) * BN
                tp.mbarrier_wait(staged, mine - 1)
                tp.store_bulk(c_s, C[lm0:lm0 + BM, ln0:ln0 + BN], fallback=False)
                tp.store_bulk_wait(c_s)
    elif DEFER:                         # consumer warpgroups, the held pieces written under the next first k-tile
        if CONSUMER_REGS > 0:
            tp.setmaxnreg(CONSUMER_REGS)
        for s in tp.static_range(STAGES):
            tp.mbarrier_arrive(empty[s])
        uses = BN // (STORE_BUFS * STORE_N)         # uses of each buffer per tile
        held = tp.cast(tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1))),
                       C.dtype)[:, _lead(BN, STORE_N, STORE_BUFS, HELD) * STORE_N:BN]
        for t in range(first, n_m * n_n, step):
            it = (t - first) // step
            turn = ((t - first) // step) * rounds       # (the tile's first slot, as mbarrier_arrays._flatten reads it)
            tp.mbarrier_wait(full[0], turn)             # slot 0: k-tile 0 (every tile has one)
            acc = tp.mma_async(a_s[0], b_s[0],
                               tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1))))
            if it > 0:      # the previous tile's held pieces, while the tensor cores run k-tile 0
                for p in tp.static_range(_lead(BN, STORE_N, STORE_BUFS, HELD), BN // STORE_N):
                    tp.mbarrier_wait(c_free[p % STORE_BUFS], (it - 1) * uses + p // STORE_BUFS - 1)
                    tp.store(c_s[p % STORE_BUFS], held[:, (p - _lead(BN, STORE_N, STORE_BUFS, HELD)) * STORE_N:
                                                       (p + 1 - _lead(BN, STORE_N, STORE_BUFS, HELD)) * STORE_N])
                    if HELD > 0 and p + STORE_BUFS < BN // STORE_N:
                        tp.mbarrier_arrive(staged[p % STORE_BUFS])      # (a later held piece waits for its read)
            tp.mma_wait(0)
            if it > 0:      # (staged once the wgmma is retired: no arrive while a wgmma group is in flight)
                for p in tp.static_range(_lead(BN, STORE_N, STORE_BUFS, HELD), BN // STORE_N):
                    if not (HELD > 0 and p + STORE_BUFS < BN // STORE_N):
                        tp.mbarrier_arrive(staged[p % STORE_BUFS])
            if DEFER == 2:      # the ring whole from slot 0 (its k-tile multiplied above): one ring loop to verify
                for k in range(rounds * STAGES):
                    tp.mbarrier_wait(full[k % STAGES], turn + k // STAGES)
                    if k < k_tiles:
                        if k > 0:
                            acc = tp.mma(a_s[k % STAGES], b_s[k % STAGES], acc)
                    tp.mbarrier_arrive(empty[k % STAGES])
            else:
                tp.mbarrier_arrive(empty[0])
                for k in range(1, rounds * STAGES):
                    tp.mbarrier_wait(full[k % STAGES], turn + k // STAGES)
                    if k < k_tiles:
                        acc = tp.mma(a_s[k % STAGES], b_s[k % STAGES], acc)
                    tp.mbarrier_arrive(empty[k % STAGES])
            tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
            out = tp.cast(acc, C.dtype)
            for p in tp.static_range(_lead(BN, STORE_N, STORE_BUFS, HELD)):    # the pieces not held, now
                if p >= STORE_BUFS:                     # this tile's piece p - STORE_BUFS has been read from it
                    tp.mbarrier_wait(c_free[p % STORE_BUFS], it * uses + p // STORE_BUFS - 1)
                elif it > 0:                            # (the previous tile's held pieces, a k-loop ago)
                    tp.mbarrier_wait(c_free[p], it * uses - 1)
                tp.store(c_s[p % STORE_BUFS], out[:, p * STORE_N:p * STORE_N + STORE_N])
                tp.mbarrier_arrive(staged[p % STORE_BUFS])
            held = out[:, _lead(BN, STORE_N, STORE_BUFS, HELD) * STORE_N:BN]
        mine = tp.cdiv(n_m * n_n - first, step)     # the block's last tile's held pieces
        for p in tp.static_range(_lead(BN, STORE_N, STORE_BUFS, HELD), BN // STORE_N):
            tp.mbarrier_wait(c_free[p % STORE_BUFS], (mine - 1) * uses + p // STORE_BUFS - 1)
            tp.store(c_s[p % STORE_BUFS], held[:, (p - _lead(BN, STORE_N, STORE_BUFS, HELD)) * STORE_N:
                                               (p + 1 - _lead(BN, STORE_N, STORE_BUFS, HELD)) * STORE_N])
            tp.mbarrier_arrive(staged[p % STORE_BUFS])
    else:                               # consumer warpgroups: wgmma over their own threads, 64 rows each
        if CONSUMER_REGS > 0:
            tp.setmaxnreg(CONSUMER_REGS)
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
            if EPILOGUE == 2 and STORE_N == 0:
                it = (t - first) // step
                if it > 0:
                    tp.mbarrier_wait(c_free, it - 1)    # the previous tile's store has read c_s
                tp.store(c_s, acc)                      # (rounded to C's dtype)
                tp.mbarrier_arrive(staged)              # the producer stores it after the next tile's copies
            elif EPILOGUE == 2:
                it = (t - first) // step
                for p in tp.static_range(BN // STORE_N):
                    if p >= STORE_BUFS:                 # this tile's piece p - STORE_BUFS has been read from it
                        tp.mbarrier_wait(c_free[p % STORE_BUFS],
                                         it * (BN // (STORE_BUFS * STORE_N)) + p // STORE_BUFS - 1)
                    elif it > 0:                        # the previous tile's last piece in this buffer
                        tp.mbarrier_wait(c_free[p % STORE_BUFS], it * (BN // (STORE_BUFS * STORE_N)) - 1)
                    tp.store(c_s[p % STORE_BUFS], acc[:, p * STORE_N:p * STORE_N + STORE_N])
                    tp.mbarrier_arrive(staged[p % STORE_BUFS])
            else:
                tp.store(C[m0:m0 + BM, n0:n0 + BN], acc)


@tp.kernel(threads=_threads, target="sm_90a")
def gemm_persistent_flat(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"],
                         C: tp.Tensor[tp.f32, "M", "N"],
                         BM: tp.constexpr = 128, BN: tp.constexpr = 256, BK: tp.constexpr = 64,
                         STAGES: tp.constexpr = 4, CONSUMERS: tp.constexpr = 2,
                         INSTR: tp.constexpr = tp.nv.wgmma_m64n256k16_bf16, SWIZZLE: tp.constexpr = tp.Swizzle(3, 3, 3),
                         PRODUCER_REGS: tp.constexpr = 0, CONSUMER_REGS: tp.constexpr = 0, GROUP_M: tp.constexpr = 8):
    """gemm_persistent with its ring as ONE flat loop per role: the form the verifier proves clean (every
    check, the tag assertion included; tests/verify/test_persistent_ring.py). Not what launch runs: on the H100
    (benchmarks/results/gemm-persistent-flat-*.json, bf16 out) it is 0.80x cuBLAS at 8192^3 (1847 us) where
    gemm_persistent is 1.03x (1570 us, an earlier run), 1.00x with setmaxnreg 64/216 (1.05x): the per-slot
    run-time divisions (tile and k-tile of slot g) and the two wgmma paths cost more than the nested loops.

    Each role runs over the block's slots g = 0 .. my_tiles * k_tiles - 1: slot g is k-tile g % k_tiles of the
    block's (g // k_tiles)-th output tile t = b + (g // k_tiles) * grid, in stage g % STAGES and phase
    g // STAGES of both mbarriers (affine in one loop index). The consumers release every stage once up front,
    so the producer's wait has no first-turn case; a tile's first k-tile multiplies into zeros, its last
    stores the accumulator."""
    a_s = tp.shared((BM, BK), tp.bf16, stages=STAGES, swizzle=SWIZZLE)
    b_s = tp.shared((BK, BN), tp.bf16, stages=STAGES, swizzle=SWIZZLE, layout=b_layout(BK, BN))
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda k, j: ("B", k, j))
    n_m = tp.cdiv(C.shape[0], BM)
    n_n = tp.cdiv(C.shape[1], BN)
    in_group = GROUP_M * n_n                       # output tiles per group of GROUP_M tile rows
    k_tiles = tp.cdiv(A.shape[1], BK)
    first = tp.block_id(0)
    step = tp.num_blocks(0)
    slots = tp.cdiv(n_m * n_n - first, step) * k_tiles     # this block's tiles times k-tiles per tile
    if tp.warpgroup_id() == 0:          # producer warpgroup: one thread issues the bulk tensor copies
        if PRODUCER_REGS > 0:
            tp.setmaxnreg(PRODUCER_REGS)
        for g in range(slots):
            t = first + (g // k_tiles) * step
            k = g % k_tiles
            first_m = (t // in_group) * GROUP_M
            group_m = tp.minimum(n_m - first_m, GROUP_M)          # the last group may be short
            m0 = (first_m + (t % in_group) % group_m) * BM
            n0 = ((t % in_group) // group_m) * BN
            tp.mbarrier_wait(empty[g % STAGES], g // STAGES)      # the consumers released the stage
            tp.copy_bulk(A[m0:m0 + BM, k * BK:k * BK + BK], a_s[g % STAGES], full[g % STAGES])
            tp.copy_bulk(B[k * BK:k * BK + BK, n0:n0 + BN], b_s[g % STAGES], full[g % STAGES])
            tp.mbarrier_arrive(full[g % STAGES])
    else:                               # consumer warpgroups: wgmma over their own threads, 64 rows each
        if CONSUMER_REGS > 0:
            tp.setmaxnreg(CONSUMER_REGS)
        for s in tp.static_range(STAGES):
            tp.mbarrier_arrive(empty[s])
        acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1)))
        for g in range(slots):
            tp.mbarrier_wait(full[g % STAGES], g // STAGES)
            if g % k_tiles == 0:        # a tile's first k-tile: from zero (a zeroing on its own would be a
                # select of all 128 registers per thread in every slot, on the consumers' critical path)
                acc = tp.mma(a_s[g % STAGES], b_s[g % STAGES],
                             tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1))))
            else:
                acc = tp.mma(a_s[g % STAGES], b_s[g % STAGES], acc)
            tp.mbarrier_arrive(empty[g % STAGES])
            if g % k_tiles == k_tiles - 1:      # a tile's last k-tile: the epilogue
                t = first + (g // k_tiles) * step
                first_m = (t // in_group) * GROUP_M
                group_m = tp.minimum(n_m - first_m, GROUP_M)
                m0 = (first_m + (t % in_group) % group_m) * BM
                n0 = ((t % in_group) // group_m) * BN
                tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
                tp.store(C[m0:m0 + BM, n0:n0 + BN], acc)
                if C.dtype.bytes < 4:   # bf16 out: the accumulator's life ends here, before the store's
                    # conversion (no spills); an f32 store copies it, spill-free only without this (ptxas)
                    acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1)))


KERNELS = {tp.f32: gemm_hopper, tp.bf16: gemm_hopper_bf16}


# H100, 4096^3 bf16: 128x256 s4 690 TFLOP/s (87% of cuBLAS), 128x256 s3 677, 128x128 s4 550 (benchmarks/NOTES.md)
PRESETS = {
    "sm_90a": dict(BM=128, BN=256, BK=64, STAGES=4, CONSUMERS=2, INSTR=tp.nv.wgmma_m64n256k16_bf16),
}
SMALL_TILE = dict(BN=128, INSTR=tp.nv.wgmma_m64n128k16_bf16)  # the 128x128 variant
NUM_SMS = 132  # H100 SXM; the policy table sizes grids against it

# The policy per shape class (`policy(M, N, K)` picks one; constexprs over PRESETS). Measured on the H100
# (benchmarks/NOTES.md, policy sweep and the shapes sweep): wait_group 1 does not pay at 128x256 with two consumer
# warpgroups (they already cover each other's waits: 0.97x at 4096^3), so the large class keeps wait_group 0;
# <= 1024^3 wants more CTAs than 128x128 tiles give (64 x 128 tiles, one consumer warpgroup, 6 stages: 1.7x
# faster than 128x256), and its bf16 output goes through the staged epilogue (EPILOGUE=1: 10.4 -> 9.5-9.8 us at
# 1024^3 in one run, twice; f32 out is slower staged, 9.7 -> 10.6); the large class's bf16 output goes out
# through the TMA store (EPILOGUE=2, 3 stages: 8192 x 8192 x 1024 271.8-293.9 -> 254.0 us, 3000 x 5000 x 4096
# 281-283 -> 274, 4096^3 206-218 -> 210); skinny M (65-256) wants split-K over the SMs; decode M (<= 64) wants
# 64 x 128 tiles, one consumer, split-K (16 x 4096 x 4096: 18.7 -> 14.8 us, 64 x 4096 x 4096: 20.4 -> 15.7;
# without split-K 25); rows that TMA cannot describe are padded once per call, after which the large tile is
# fastest (2051 x 2045 x 1000: 128x64 s6 57.6 us, 128x256 s4 40.0).
POLICIES = {
    "large": dict(IN_FLIGHT=0),
    "small": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=tp.nv.wgmma_m64n128k16_bf16),
    "skinny": dict(IN_FLIGHT=1, **SMALL_TILE),
    "decode": dict(IN_FLIGHT=1, BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=tp.nv.wgmma_m64n128k16_bf16),
    "unaligned": dict(IN_FLIGHT=0),
}
# over POLICIES where the output is bf16 (policy(..., out=tp.bf16)); f32 out: the staged tile does not fit
# beside 128 x 256 tiles, and it measured slower at 1024^3. The large class's register budgets (setmaxnreg 64 / 216)
# measured +7-12% on the H100 in two runs (benchmarks/results/gemm-large-regs-{1,2}-*.json, bf16 out against
# cuBLAS, median of graph replays): 4096^3 0.85 -> 0.93x, 4096 x 14336 x 4096 0.82 -> 0.91, 8192 x 8192 x 1024
# 0.71 -> 0.77, 8192^3 0.87 -> 0.94-0.95, 4096 x 4096 x 14336 0.87 -> 0.98 (40 / 232 the same within 1%, but its
# 40-register producer spills into the consumer's k-loop; 64 / 216 spills 8 bytes outside it). 2x1 clusters with B
# multicast (gemm_cluster, CLUSTER_M=2) add nothing over this at these shapes (0.90 / 0.89 / 0.70 / 0.95 / 0.97):
# not in the table.
BF16_OUT = {"small": dict(EPILOGUE=2, STAGES=8),
            "large": dict(STAGES=3, EPILOGUE=2, PRODUCER_REGS=64, CONSUMER_REGS=216)}
# (The small class's bf16 output went out through the staged copy, EPILOGUE=1, until G16: the TMA store measured
# faster in three runs, device time by torch.profiler: 1024^3 8.57 -> 8.01 us, 768^3 7.10 -> 6.66, 1024 x 1024 x 4096
# (these tiles) 20.92 -> 20.39 (benchmarks/results/gemm-g16-diag-*.json); graph time 1024^3 9.9-10.4 -> 9.5 in G4's
# call 4 (gemm-tma-store-sweep-*.json). f32 out keeps the registers' store: the same at 1024^3 (7.96 / 7.93 us), slower
# at 1024 x 1024 x 4096 (22.3 -> 24.8 us with 6 stages).)
# G22 (H100, benchmarks/results/gemm-g22-*.json): the small class's cost per k-tile follows the bytes in flight (a
# 64 x 128 block with one consumer warpgroup is latency-bound: 0.327 us a k-tile at 6 stages, 0.275 at 8, cuBLAS
# 0.184 with 8 stages and multicast), so its bf16 output takes 8 stages beside the 16 KB store tile (213 KB): graph
# time, alternated twice with the 6 stages before, x cuBLAS: 1024^3 8.82 / 9.14 -> 8.50 / 8.56 us (0.70-0.72 ->
# 0.77-0.78), 1024 x 1024 x 4096 (the large class on these tiles) 25.14 / 25.08 -> 21.97 / 21.88 (0.64-0.65 -> 0.75),
# once: 512 x 2048 x 4096 24.66 / 24.59 -> 21.53 (0.67 -> 0.81), 768^3 7.27 / 7.29 -> 7.16 (device 6.75 -> 6.23). f32
# out (registers' store, 4 stages) gains nothing from 8: 1024^3 9.27 / 9.20 -> 9.52 / 9.45, 1024 x 1024 x 4096
# 22.95 / 22.96 -> 23.54 / 23.31.
# The split's reduction per class where `policy(..., fixup=True)` splits K (gemm_splitk; FIXUP 0 or absent: atomics
# into a zeroed target plus, for bf16 out, a rounding pass). FIXUP 1 / 2 in no class: they measured SLOWER than the two
# passes on every split shape (H100, benchmarks/results/gemm-fixup-*.json; bf16 out, us: 16 x 4096 x 4096 14.6 with
# the passes, 17.7 FIXUP=1, 23.0 FIXUP=2; 128 x 4096 x 4096 (64 x 128 tiles, split 4) 27.4 / 37.4 / 41.9; 1024^3 split 4
# 31.0 / 55.8 / 60.3): the last split's chain (its part written, a device fence, the ticket, the other parts read
# back, C stored) is ~3-9 us of latency at the end of every wave, more than the passes' two short launches.
# FIXUP=3 keeps the slots (plain stores, no ticket) and sums them, rounded once, in a second kernel (splitk_sum):
# one pass after the GEMM instead of a zeroing before and a rounding after.
# FIXUP=3 measured (H100, benchmarks/results/gemm-g6-skinny-*.json, bf16 / f32 out, us, one run, each row the better
# of two medians of graph replays): 16 x 4096 x 4096 passes 14.2-14.4 / 13.1, FIXUP=3 12.8 / 13.1; 64 x 4096 x 4096
# 15.6-15.7 / 13.8-13.9 -> 12.8 / 13.2: the decode class takes it. "skinny_64x128" is the skinny branch that runs
# 64 x 128 tiles split over K (below): 128 x 4096 x 4096 with 128 x 128 tiles split 4 (the policy before) 21.4-22.5 /
# 19.3-19.9, 64 x 128 s4 two blocks per SM split 2 with the passes 20.9 / 18.5, with FIXUP=3 18.0 / 19.0.
SPLIT_FIXUP: dict = {"decode": 3, "skinny_64x128": 3, "skinny_128x128": 3}
MAX_SLOTS = 8   # FIXUP 2 and 3 unroll one load per split: past this many splits the passes serve
# f32 out at <= 1024^3: 4 stages, not 6 (1024^3: 9.5-9.6 -> 8.8-8.9 us in two runs, gemm-shapes{,-confirm}-*.json)
F32_OUT = {"small": dict(STAGES=4)}
# The large class's bf16 output in the grouped tile order (gemm_hopper GROUP_M=16) where A alone overflows the L2
# (50 MB on the H100): in row order a wave of 132 blocks spans every row tile of ~132 / cdiv(M, 128) columns, so each
# wave streams all of A from HBM; 16 row tiles x ~8 columns per wave read ~32 MB of A and ~34 MB of B instead. H100,
# bf16 out against cuBLAS in the same run, one run each (benchmarks/results/logs/g7-large-sweep-call3.log,
# gemm-large-warm-2026-11-24-*.json): 8192^3 0.929 -> 0.981 (1637.6 -> 1558.0 us; cuBLAS 1520.9 / 1528.6), 4096 x
# 4096 x 14336 0.973 -> 0.990 (inside the ~3% run-to-run spread). Shapes whose A fits (4096^3, 4096 x 14336 x 4096,
# 8192 x 8192 x 1024) and f32 out keep the row order (not measured).
L2_BYTES = 50 * 2**20
LARGE_GROUP_M = 16
# G9 (H100, bf16 out against cuBLAS in the same run; benchmarks/results/gemm-large-g9-call{1,3}-*.json and
# logs/g9-call2-*): cuBLAS's own kernel at these shapes is persistent (nvjet_sm90_tst_256x128_64x4_1x2 /
# 320x128_64x3_1x2: a grid of 132, clusters of 2 along our M) and stores through TMA. gemm_persistent with the TMA
# store overlapped with the next tile (EPILOGUE=2, 3 stages beside the 64 KB c_s, 64 / 216 registers, GROUP_M 8)
# against the policy before (gemm_hopper, s3, TMA store, 64 / 216): 8192 x 8192 x 1024 0.818 -> 0.902 (237.8 -> 211.7
# us), 4096 x 14336 x 4096 0.934 -> 0.963, 8192^3 0.991 -> 1.014, 4096 x 4096 x 14336 0.985 -> 0.997, 4096^3 0.954 ->
# 0.985 (0.950 -> 0.978 in a second run); never slower. `launch` callers (fixup, forms) take it for the large class's
# bf16 output with more 128 x 256 tiles than SMs (every measured shape had >= 512) whose B rows are whole 128-byte lines
# (else the cluster form); its store is TMA only, so a C that a tensor map cannot describe (not contiguous, base not
# 16-byte aligned) runs the policy without it.
# G12 (H100, bf16 out against cuBLAS in the same run; benchmarks/results/gemm-large-g12-call{1,2}-*.json): the store
# in 64-column pieces through two 16 KB buffers and a store warp (STORE_N=64), which leaves room for a 4th stage
# (cuBLAS's 4 x 48 KB + a small store buffer), against the whole-tile c_s with 3 stages, 64 / 216 both: 8192 x 8192 x
# 1024 0.873 -> 0.954, 4096^3 0.980 -> 0.995, 4096 x 14336 x 4096 0.962 -> 0.985, 8192^3 1.012 -> 1.018, 4096 x 4096
# x 14336 0.996 -> 0.998 (call 1); the pieces with 3 stages gain nothing (0.964 / 0.906 / 0.948 / 0.984 / 0.996): the
# 4th stage is the gain. No setmaxnreg 0.97 / 0.93 / 0.96 / 0.99 / 0.97; 96 / 200 as 64 / 216.
# V11 (H100, bf16 out against cuBLAS in the same run, two sweeps; benchmarks/results/gemm-large-v11-call1{a,b}-*.json):
# DEFER=2, pieces 2 and 3 held in registers and written under the next tile's first k-tile (G15's schedule, the ring
# whole from slot 0: the form tilepy-verify proves, clean in 1.2-1.5 s CPU at these constexprs, load 11-14), against
# the form above: 8192 x 8192 x 1024 0.960 / 0.959 -> 1.009 / 1.004, 4096 x 14336 x 4096 0.985 / 0.983 -> 1.008 /
# 1.006, 4096^3 0.993 / 1.000 -> 1.009 / 1.009, 4096 x 4096 x 14336 0.996 / 0.998 -> 1.004 / 1.005, 8192^3 1.020 /
# 1.051 -> 1.031 / 1.042 (even within that shape's spread: cuBLAS itself 1531 / 1646 us in the two runs); 168
# registers, no spills. G15's DEFER=1 (the same schedule, the first slot taken out of the ring, not proved) measured
# 1.004-1.066 in three runs.
LARGE_PERSISTENT = dict(PERSISTENT=1, STAGES=4, EPILOGUE=2, STORE_N=64, PRODUCER_REGS=64, CONSUMER_REGS=216,
                        GROUP_M=8, DEFER=2)
# G18 (H100, f32 out against torch.mm(out_dtype=float32) in the same run, two sweeps; benchmarks/results/
# gemm-large-g18-call1{a,b}-*.json): the same persistent form for f32 out, in 32-column pieces (a (128, 32) f32 buffer
# is 16 KB: two beside the 4 stages, 229472 bytes) against the f32 policy before (gemm_hopper 128 x 256 s4, the
# registers' store): 8192 x 8192 x 1024 0.871 / 0.855 -> 0.964 / 0.967, 4096 x 14336 x 4096 0.933 / 0.926 -> 0.971 /
# 0.979, 4096^3 0.920 / 0.924 -> 0.990 / 0.989, 4096 x 4096 x 14336 0.929 / 0.960 -> 0.997 / 0.996, 8192^3 0.963 /
# 0.969 -> 1.015 / 1.007. The buffers' 128-byte swizzled rows take the consumers' 8-byte pairs with a 2-way bank
# conflict; 32-byte column blocks (STORE_SPAN=32, conflict-free, four TMA boxes a piece) measured SLOWER (0.875-0.881
# at 8192 x 8192 x 1024, 0.966-0.974 at 4096^3); 4 pieces of 64 beside 3 stages 0.916-0.927 / 0.965-0.966; setmaxnreg
# alone on the policy 0.854-0.881 / 0.953-0.961. 3000 x 5000 x 4096 (B rows off 128-byte lines) keeps the cluster
# (0.843-0.855; these forms 0.675-0.683). The 8 pieces verify in 1.9-2.1 s CPU (8 writes x 8 TMA stores of c_s for
# the race check), over the 2 s bar; 4 pieces of 64 columns through ONE 32 KB buffer (STORE_BUFS=1: each piece
# waits for the previous one's read) verify in 0.8 s and measured the same within the spread, two more runs
# (gemm-large-g18-call2{a,b}-*.json, 8 pieces / 4 through one buffer): 8192 x 8192 x 1024 0.967 / 0.969, 0.987 /
# 0.978; 4096 x 14336 x 4096 0.971 / 0.970, 0.976 / 0.976; 4096^3 0.993 / 0.991, 0.992 / 0.984; 4096 x 4096 x 14336
# 0.988 / 0.995, 1.021 / 0.993; 8192^3 1.025 / 1.001, 1.005 / 1.015: the policy is the one-buffer form.
# (Spelled out, not derived from LARGE_PERSISTENT: a bf16-only knob there, DEFER, does not apply to one buffer.)
F32_ONE_BUFFER = dict(PERSISTENT=1, STAGES=4, EPILOGUE=2, STORE_N=64, STORE_BUFS=1, PRODUCER_REGS=64,
                      CONSUMER_REGS=216, GROUP_M=8)
# G26 (H100, f32 out x torch.mm(out_dtype=float32), benchmarks/results/gemm-large-g26-call{1,3}*-*.json, two runs each):
# the 8 pieces of 32 through two buffers again, with the last two held in registers and written under the next tile's
# first k-tile (DEFER=2, HELD=2: 16 registers a piece), the store warp walking the pieces in a run-time loop
# (STORE_LOOP=1: one TMA store site, which the verifier proves clean in ~1 s CPU where the unrolled one took 4-5 s),
# against the one-buffer form above: call 3 (the loop) 8192 x 8192 x 1024 0.958 / 0.963 -> 0.989 / 0.993, 4096 x
# 14336 x 4096 0.974 / 0.972 -> 0.989 / 0.990, 4096^3 0.990 / 0.989 -> 1.006 / 0.997; call 1 (unrolled) also 4096 x
# 4096 x 14336 1.005 / 0.996 -> 0.999 / 1.001 and 8192^3 0.986 / 0.997 -> 1.024 / 1.025. 168 registers, no spills.
LARGE_PERSISTENT_F32 = dict(F32_ONE_BUFFER, STORE_N=32, STORE_BUFS=2, DEFER=2, HELD=2, STORE_LOOP=1)
# G8 (H100, benchmarks/results/gemm-g8-small{,2}-*.json; bf16 / f32 out, us, cuBLAS timed beside each row). The forms
# below are taken by `launch` callers only (`policy(..., fixup=True)`, `forms=True`: the lowering launches
# gemm_hopper itself and cannot run gemm_splitk_swap or gemm_cluster).
# * Decode rows (M <= 32) with a split: swap-AB (gemm_splitk_swap: C^T = B^T A^T, A's rows the instruction's N, 128
#   columns of C per block over two consumer warpgroups, split-K into FIXUP=3's slots), cuBLAS's own form (its
#   nvjet 128x16 tile, 11 stages, split-K): 16 x 4096 x 4096 12.9-13.2 -> 9.4-9.6 (0.67 -> 0.94-0.95x), 16 x 4096 x
#   14336 47.5 -> 43.7 (0.91 -> 0.99), 32 x 4096 x 4096 13.1 -> 10.8 (BM 32, 10 stages). At 64 rows it measured the
#   same as gemm_splitk (12.7 vs 13.0): not taken there.
SWAP_DECODE = {16: dict(BM=16, INSTR=tp.nv.wgmma_m64n16k16_bf16, STAGES=8),
               32: dict(BM=32, INSTR=tp.nv.wgmma_m64n32k16_bf16, STAGES=8, BN=64, K_WAYS=2),
               "17-31": dict(BM=32, INSTR=tp.nv.wgmma_m64n32k16_bf16, STAGES=10)}
# (17-32 rows since G11: K_WAYS=2, both consumers over one 64 x 32 tile of C^T on alternate k-tiles, 8 stages per ring,
# split 2 at N = 4096 (64 tiles): 32 x 4096 x 4096 bf16 / f32 out 12.59 / 12.67 -> 11.83 / 11.13 us and 11.97 / 11.69
# -> 10.88 / 10.99 (0.71-0.73 -> 0.76-0.78x cuBLAS; two runs, gemm-g11-{kways,table}-*.json); B as (N, K) even with the
# BM 32 x BN 128 form it replaces (0.74-0.77 either way). Before: BN 128 over two consumers, 10 stages, split 4. A
# third run (gemm-g11-after-*.json): 32 rows 12.39-12.74 / 12.55-12.68 -> 11.79-12.15 / 12.08-12.19; but 20 rows 12.16
# -> 13.25 (K_WAYS's A boxes, twice as many as BN 128's, with rows past M cost time: at 80 rows 20.7 us as given, 16.5
# with A padded to whole tiles), so 17-31 rows keep the BN 128 form.)
# * Mid-size shapes of the large class whose 128 x 256 tiles fill at most half the SMs (the split-K 2 with atomics
#   and a rounding pass it took before) and whose 128 x 128 tiles fill 3/4 to 1 wave: those, no split, wait_group 0
#   (the lowering gets it too: the plain kernel); bf16 out 5 stages with the TMA store,
#   f32 out 4 stages: 2048 x 1024 x 1024 bf16 32.9 -> 10.8 (0.27 -> 0.83x), f32 29.8 -> 12.6 (0.34 -> 0.81x). (Shapes
#   whose 128 x 256 tiles fill more keep them: 2048 x 2048 x 1024 0.88, 1536^3 0.61 measured best as they are.)
MID_128x128 = {tp.bf16: dict(STAGES=5, EPILOGUE=2), tp.f32: dict(STAGES=4, EPILOGUE=0)}
# G16 (H100, benchmarks/results/gemm-g16-*.json; us per call, graph time, x cuBLAS in the same run):
# * Large shapes whose 128 x 256 tiles would split K (at most half a wave) and whose 64 x 128 tiles fill 3/4 to one
#   wave (neither the mid-size rule above): the small class's tiles, unsplit (SMALL_TILES_LARGE): 1024 x 1024 x 4096
#   bf16 out 36.76 (128 x 256 split 4 with atomics, an f32 workspace and a rounding pass: 0.42x) -> 20.63 (0.77x),
#   f32 out 32.24 (0.50x) -> 22.97 (0.71x); split 2 over these tiles with FIXUP=3 and two blocks per SM 31.0 / 25.0.
# * The small class where its 64 x 128 tiles fill at most half a wave and K has at most 16 k-tiles: 64 x 64 tiles, 8
#   stages, no split (SMALL_64x64) instead of 64 x 128 tiles split 2 with atomics (and, for bf16, a workspace and a
#   rounding pass): 512^3 bf16 10.30 (0.40x) -> 5.64 (0.69x); 64 x 128 tiles unsplit 6.38, split 2 with FIXUP=3 6.84.
SMALL_64x64 = dict(BM=64, BN=64, STAGES=8, CONSUMERS=1, INSTR=tp.nv.wgmma_m64n64k16_bf16, IN_FLIGHT=1, EPILOGUE=0)
# G22 (H100, benchmarks/results/gemm-g22-call{2,3}-*.json; graph us, alternated twice with the policy in one run, x
# cuBLAS): gemm_cluster RELAXED=1 (2x1 clusters along M, B multicast, the cluster barriers' release / acquire gone: the
# opening one relaxed, the closing one replaced by the producer's tail), 8 stages, taken by `launch` callers only
# (fixup and forms; the lowering keeps the plain kernel):
# * f32 out on 64 x 128 tiles with at least 16 k-tiles (the small class past half a wave, and the large class on these
#   tiles): 1024 x 1024 x 4096 22.95 / 22.96 -> 21.43 / 21.13 (call 2), 23.43 / 23.51 -> 21.54 (call 3) (0.72 ->
#   0.73-0.78); 512 x 2048 x 4096 23.06 / 23.03 -> 21.09 / 21.33, 23.78 / 23.61 -> 21.91 (0.74-0.81 -> 0.84-0.87);
#   1024^3 9.27 / 9.20 -> 9.06 / 9.11, 9.31 / 9.27 -> 9.00 (0.77-0.79 -> 0.79-0.81); 768^3 (12 k-tiles) even (7.03 /
#   6.97 -> 7.14 / 6.97): not taken there. (bf16 out on these tiles: with the tail before the epilogue 1024^3 7.55
#   -> 7.33 us device, 1024 x 1024 x 4096 21.05 -> 19.46, one run of source edits (gemm-g22-tail-*.json); alternated
#   and taken by G29: SMALL_CLUSTER_BF16 below.)
# * bf16 out where SMALL_64x64 applies: those 64 x 64 tiles in the clusters, the TMA store: 640^3 6.45 / 6.44 ->
#   5.91 / 5.94 (0.70 -> 0.78-0.79), 512^3 5.60 / 5.58 -> 5.46 / 5.39 (0.70-0.71 -> 0.72-0.73), measured with the tail
#   after the store (the tail before it is faster on 64 x 128 tiles at every K). f32 out there mixed (640^3 5.94 /
#   6.00 -> 5.77 / 6.20): not taken.
CLUSTER_RELAXED = dict(IN_FLIGHT=0, CLUSTER_M=2, RELAXED=1, STAGES=8)
SMALL_CLUSTER_F32 = dict(BM=64, BN=128, CONSUMERS=1, INSTR=tp.nv.wgmma_m64n128k16_bf16, EPILOGUE=0, **CLUSTER_RELAXED)
SMALL_64x64_CLUSTER_BF16 = dict(BM=64, BN=64, CONSUMERS=1, INSTR=tp.nv.wgmma_m64n64k16_bf16, EPILOGUE=2,
                                **CLUSTER_RELAXED)
SMALL_CLUSTER_MIN_K_TILES = 16
# G29 (H100, benchmarks/results/gemm-g29-call1-*.json; graph us over rotated input sets (METHOD.md), alternated twice
# with the policy in one run, x torch.matmul bf16): bf16 out on the same 64 x 128 tiles in the relaxed 2x1 clusters,
# the producer's tail before the TMA store, where f32 out takes them (>= 16 k-tiles): 1024 x 1024 x 4096 22.28 /
# 22.79 -> 20.64 / 20.74 (0.728 / 0.713 -> 0.787 / 0.777), 512 x 2048 x 4096 22.17 / 22.27 -> 20.61 / 20.51 (0.800 /
# 0.772 -> 0.867 / 0.867), 1024^3 8.35 / 9.09 -> 8.54 / 9.07 (0.756 / 0.766 -> 0.776 / 0.773; device 7.51 / 7.63 ->
# 7.24 / 7.44); 768^3 (12 k-tiles) 0.715 / 0.708 -> 0.701 / 0.690: not there. Clusters of 4 row tiles (B read once per
# 4) LOST 2x at 128 blocks (1024^3 0.46, 1024 x 1024 x 4096 0.41: 13.4 / 36.9 us device against 7.2 / 19.8; four
# blocks of 213 KB each must share a GPC, and fewer than 32 such clusters fit at once); even at 768^3 (72 blocks).
SMALL_CLUSTER_BF16 = dict(SMALL_CLUSTER_F32, EPILOGUE=2)
# G29 call 2 (gemm-g29-call2-*.json, the same rule): where those 64 x 128 tiles (the large class's branch below) have
# >= 64 k-tiles, cuBLAS's 128 x 64 tile as two consumer warpgroups over ONE tile on alternate k-tiles (gemm_splitk_swap
# K_WAYS=2 unsplit: two rings of 4 stages, two wgmma chains in flight per SM) against the relaxed 2x1 cluster: bf16 out
# 512 x 2048 x 4096 20.99 / 20.84 -> 20.06 / 20.01 us, 1024 x 1024 x 4096 21.04 / 20.89 -> 20.61 / 20.78 (0.764 /
# 0.783 -> 0.781 / 0.783); f32 out 1024 x 1024 x 4096 21.81 / 21.87 -> 21.07 / 21.00 (0.774 / 0.776 -> 0.804 /
# 0.806). With one input set (operands in the L2) it is 2 us faster still (18.3 against 20.4: 0.88-0.90x): it pays
# 2.4 us for operands from DRAM where the cluster pays 0.6 and cuBLAS nothing. At 16 k-tiles it loses (1024^3 bf16
# 8.66 / 8.98 -> 10.04 / 9.98: the hand-over and C^T's register store), 768^3 too; in 2x1 clusters it loses.
# Call 3 (gemm-g29-call3-*.json, alternated twice against the cluster): 1024 x 1024 x 4096 bf16 21.07 / 21.04 -> 20.08
# / 20.72, f32 21.84 / 21.48 -> 21.37 / 21.39; 512 x 2048 x 4096 bf16 21.53 / 21.22 -> 20.23 / 20.52, f32 22.28 / 22.01
# -> 20.58 / 20.68 (0.82-0.84 -> 0.93-0.95); 1024 x 1024 x 8192 bf16 38.74 / 38.78 -> 35.77 / 36.27 (0.71-0.75 ->
# 0.81-0.83), f32 40.30 / 39.75 -> 36.38 / 36.27; but LOST at 2048 x 512 x 4096 (16 row tiles over 8 column tiles: bf16
# 22.04 / 21.90 -> 27.66 / 27.27, f32 22.74 / 22.44 -> 27.01 / 27.76, with one set too: not understood) and at 1000 x
# 1000 x 4096 (B's rows 2000 bytes, off 128-byte lines: each 128-byte box row spans two lines, read by every row tile
# where the cluster multicasts it; bf16 25.52 / 25.70 -> 32.87 / 33.91). Hence taken where B's rows are whole lines
# and the row tiles are no more than the column tiles (the measured wins; the rule is fitted to these five shapes).
# At 32 / 48 k-tiles even (1024 x 1024 x 2048 bf16 13.61 / 13.37 -> 13.95 / 14.01; 3072 f32 18.2-18.4 -> 17.8-17.9).
# wait_group 0 (each ring's 4 stages all in flight) mixed: not taken.
SMALL_KWAYS = dict(SWAP_AB=1, K_WAYS=2, CONSUMERS=2, IN_FLIGHT=1, SPLIT_K=1, STAGES=4, BM=128, BN=64,
                   INSTR=tp.nv.wgmma_m64n128k16_bf16)
# G33 (H100, rotated, alternated twice in one process, results/gemm-g33-call3-*.json): with the role-relative thread
# index known to lie in [0, size) (tilepy_hip.render.walk.role_tid: K_WAYS's hand-over and C^T store no longer signed
# divisions, 0.8-1.3 us of device time a call) K_WAYS passes the relaxed cluster at 32 k-tiles: 1024 x 1024 x 2048 bf16
# 12.84 / 12.64 -> 12.39 / 12.56 us (0.78 -> 0.79-0.80x), f32 13.34 / 13.74 -> 13.08 / 13.00 (0.76-0.77 -> 0.81-0.82);
# not at 16 (1024^3: the small class keeps the cluster, 8.16-8.73 against K_WAYS's 9.10-9.17 rotated). Call 4
# (gemm-g33-call4-*.json, the policy against the cluster it replaced, alternated twice): 1024 x 1024 x 2048 bf16 12.73 /
# 12.79 -> 12.17 / 12.53, f32 13.62 / 13.60 -> 12.99 / 12.87; 1024 x 1024 x 3072 bf16 16.61 / 16.73 -> 15.99 / 15.64
# (0.76-0.82 -> 0.83x), f32 17.54 / 17.57 -> 16.42 / 16.36; 512 x 2048 x 2048 bf16 12.84 / 12.56 -> 12.22 / 12.30, f32
# 13.58 / 13.72 -> 13.01 / 12.72 (0.81-0.84 -> 0.88-0.90). But where A's rows are not whole 128-byte lines (1000 x 1024
# x 3000: 6000 bytes) K_WAYS LOST, 20.05 / 20.40 -> 27.35 / 27.27 (device 17.4 -> 25.2 us; f32 the same), as G29 saw for
# B's rows (its 128-byte box rows each span two lines, and K_WAYS reads A's tile once per column tile where nothing
# multicasts it): K_WAYS needs A's rows whole lines too (kept). The role thread index in [0, size) was taken back out of
# the renderer (it made the large persistent GEMM spill: tilepy_hip.render.walk.role_tid), so K_WAYS is again 0.8-1.3
# us slower a call than G33 measured it, and at 32-63 k-tiles the relaxed cluster was faster without it (G29 above,
# 1024 x 1024 x 2048: 13.61 / 13.37 against 13.95 / 14.01): K_WAYS from 64 k-tiles, as G29 measured.
# G37 (H100, rotated, results/gemm-g37-call1-*.json): gemm_splitk_swap alone takes the unsigned role index back
# (@tp.kernel(unsigned_role_index=True): outside loops only, so no other kernel's render changes); K_WAYS then beats
# the relaxed cluster at 32-48 k-tiles in all eight pairs, alternated twice: 1024 x 1024 x 2048 bf16 12.17 / 12.23 ->
# 11.79 / 11.75 us (0.77-0.79 -> 0.81x), f32 12.67 / 12.90 -> 12.23 / 12.46; 1024 x 1024 x 3072 bf16 16.21 / 16.32 ->
# 15.11 / 15.13 (0.78 -> 0.81); 512 x 2048 x 2048 bf16 12.17 / 12.17 -> 11.37 / 11.61 (0.82-0.84 -> 0.90) (with the
# signed index K_WAYS ran 12.66-12.85, 16.47-16.73, 12.54-12.68: behind the cluster, as G29 found). From 32 k-tiles
# again; at 16 (1024^3) the cluster stays (G33: K_WAYS 9.10-9.17 against 8.16-8.73 us).
SMALL_KWAYS_MIN_K_TILES = 32
# * B rows a multiple of 16 bytes (TMA) but not of 128 (a 128-byte box row then spans two L2 lines): the large policy
#   in 2x1 clusters, B's tile multicast (gemm_cluster), read once per pair: 3000 x 5000 x 4096 bf16 269.3-269.8 ->
#   199.7 (0.64-0.66 -> 0.87x), f32 282.9 -> 210.1 (0.62 -> 0.90x); 4096 x 4104 x 4096 bf16 293.5 -> 270-272 (0.65 ->
#   0.73). (B padded to 128-byte rows beforehand: 182.8 us kernel, 0.99x, but its per-call copy costs 57 us. A's rows
#   unaligned instead (4096 x 4096 x 4104): the policy as it is, 0.94; the cluster 0.85-0.88.)
# * 225-256 rows whose 64 x 128 tiles fill one wave: those tiles in 2x1 clusters (B multicast), 6 stages, bf16 out
#   through the TMA store: 256 x 4096 x 4096 bf16 26.0-26.5 -> 22.5-24.1, f32 25.9-26.7 -> 23.2-23.8 (three runs);
#   not at 200 x 4096 x 4096 (24.4-26.3 either way, the cluster 0-2% slower in two runs of three). (G27 replaced them
#   with two unsplit row tiles of swap-AB, `row_tiles2` below: 0.4-0.5 us faster, rotated, in four alternations.)
# G26 (H100, benchmarks/results/gemm-large-g26-call1-odd{a,b}-*.json, two runs alternating with the peer): B rows off
# 128-byte lines with f32 out, 3000 x 5000 x 4096 x torch.mm(out_dtype=f32): the 2x1 cluster (4 stages, registers'
# store, no setmaxnreg) 0.839 / 0.849 -> clusters of 4 (B read once per 4 row tiles) with 64 / 216 registers 0.868 /
# 0.901 (the 2x1 cluster with 64 / 216 0.855 / 0.885). bf16 out keeps the 2x1 cluster (clusters of 4 0.851 / 0.861
# against 0.853 / 0.876). 128 x 192 tiles (4.9 waves instead of 3.6) LOST in both: bf16 0.80, f32 0.76-0.79.
# Taken where the row tiles are whole clusters of 4 (no empty row tiles). Confirmed (gemm-large-g26-call2-odd{a,b}-*):
# this policy 0.885 / 0.888 against the one before 0.850 / 0.844, 4096 x 4104 x 4096 0.754 / 0.745 against 0.725 /
# 0.728; most of it is the registers (the 2x1 cluster with 64 / 216: 0.861 / 0.867, 0.740 / 0.738).
UNALIGNED_B_F32 = dict(CLUSTER_M=4, PRODUCER_REGS=64, CONSUMER_REGS=216)
# * G11: 65-128 rows whose 64 x 64 tiles of C^T fill half a wave to one (two row tiles; N ~ 2100-4200): swap-AB with
#   both consumer warpgroups on ONE 64 x 64 tile, consumer r taking the k-tiles 2j + r into an accumulator of its own
#   (gemm_splitk_swap K_WAYS=2: two rings of 6 stages, the sums added through shared memory; cuBLAS's 384-thread
#   form), unsplit: 128 x 4096 x 4096 bf16 / f32 out 18.67 / 19.51 us (64 x 128 tiles split 2, FIXUP=3) -> 15.85 /
#   16.16 (0.77 / 0.75 -> 0.91 / 0.94x cuBLAS), 100 x 4096 x 4096 18.10 / 18.39 -> 16.86 / 16.96 (0.66 -> 0.71x)
#   (benchmarks/results/gemm-g11-kways-*.json); again in the second call, the policy before alternated with it twice
#   (gemm-g11-table-*.json): 128 rows 18.95-19.72 / 20.09-20.44 -> 15.67-15.80 / 16.50 (0.76 -> 0.93-0.94x), 100 rows
#   17.59-17.70 / 18.39-18.56 -> 16.66-16.96 / 16.63-16.69 (0.66-0.68 -> 0.70-0.73x). Not at 80 rows: 17.26 / 18.60 ->
#   19.26 / 19.30 (the second row tile's A box 48 of 64 rows past M; 100 rows: 28 past, 128: none): hence M_SHIFT below.
#   The same form in 1x2 clusters (B multicast, cuBLAS's own): 18.4 / 18.5, no gain; at 32 / 64 rows (64 x 16 / 64 x
#   32 tiles) unsplit it is slower than the split policies.
#   With the last row tile shifted back to end at M (M_SHIFT=1: no rows past M in A's box), two alternations
#   (gemm-g11-shift-*.json): 80 rows 17.30-17.37 / 18.05-18.31 -> 15.83-15.92 / 16.05-16.08 (0.56 / 0.54 -> 0.60x),
#   100 rows (K_WAYS unshifted) 17.04-17.15 / 17.00-17.12 -> 16.05-16.20 / 16.00-16.09 (0.70-0.71 -> 0.74-0.75x), 72
#   rows 17.98 -> 15.97 (one): so 65-128 rows, shifted.
SWAP_KWAYS = dict(SWAP_AB=1, K_WAYS=2, CONSUMERS=2, BM=64, BN=64, STAGES=6, IN_FLIGHT=1, SPLIT_K=1, M_SHIFT=1,
                  INSTR=tp.nv.wgmma_m64n64k16_bf16)
# * G14: 17-128 rows (32-128 in the first calls) whose 64-column tiles of C^T, split over K in two, fill half a wave to
#   one (N ~ 2100-4200; K at least 32-64 k-tiles, below): ONE row tile of BM = M rounded up to a wgmma width (n24 / 32 /
#   48 / 64 / 80 / 96 / 104 / 112 / 128: few or no rows past M in A's box), K_WAYS=2, and K split over the two blocks of
#   a (1, 1, 2) cluster, rank 1's sum read by rank 0 through distributed shared memory (CLUSTER_K=2: no slots, no
#   splitk_sum). H100, alternated twice with the policy before, bf16 / f32 out, us (x cuBLAS in the same row;
#   benchmarks/results/gemm-g14-clusterk-*.json): 32 rows 11.52-11.87 / 11.82-11.83 -> 10.99-11.07 / 10.98-11.00
#   (0.76-0.77 -> 0.81-0.82), 64 rows 13.84-14.68 / 13.60-13.70 -> 12.13-12.54 / 11.80-11.95 (0.66-0.69 -> 0.78-0.89),
#   80 rows 15.75-15.93 / 16.44-16.64 -> 12.94-12.96 / 13.76-13.88 (0.60-0.63 -> 0.73-0.75), 100 rows (n104) 16.15-16.33
#   / 16.43-16.51 -> 14.74-14.90 / 14.84-14.88 (0.78-0.79 -> 0.87), 128 rows 16.73-16.89 / 16.76-16.92 -> 16.16-16.24 /
#   16.26-16.33 (0.91-0.93 -> 0.94-0.97); once: 48 rows 13.57 -> 11.88 (0.67 -> 0.77), 112 rows 17.00 -> 15.57 (0.66 ->
#   0.72). Stages per ring: what fits 227 KB beside the (64, BM) f32 hand-over tile (80 rows: 4 stages 12.90 / 13.21 as
#   5's; 128 rows: 3 stages lose, 16.88 / 17.74). 16 rows (n16, 0.98 against the split-4 policy's 0.93, one run, inside
#   the spread) keep the policy. A second call, the policy with it alternated twice against the forms it replaced
#   (gemm-g14-table-*.json): 32 rows 0.75-0.76 -> 0.80-0.83, 40 rows 0.73 -> 0.85, 64 rows 0.68-0.73 -> 0.78-0.81, 72 /
#   80 / 96 (n96) rows 0.61-0.66 -> 0.71-0.78, 120 rows 0.96 -> 1.01, 128 rows 0.92 -> 0.92-0.97; but 100 x 2200 x 1000
#   LOST, 9.29 -> 10.84 us (0.69 -> 0.59): the cluster's kernel costs ~1.5 us more than the same blocks unclustered (32
#   rows: 9.95 against 8.44 us), which 16 k-tiles do not win back (at 100 rows the slope is ~0.146 us a k-tile for two
#   row tiles unsplit, ~0.084 for the split: even at ~41 k-tiles). A third call, the form forced against the forms
#   before at 32 / 48 k-tiles (gemm-g14-ksplit-*.json, bf16 out, us): K = 2048: 32 rows 7.84-8.13 -> 8.01 (even), 64
#   rows 9.26-9.36 -> 8.83 (-5%, twice), 80 rows 9.64 -> 9.60 (even), 100 rows 9.60-9.65 -> 10.53-10.59 (loses), 128
#   rows 9.63 -> 11.39 (loses); K = 3072: 32 rows 9.58 -> 9.12, 64 rows 10.84 -> 10.17, 100 rows 12.35 -> 12.38 (even),
#   128 rows 12.49 -> 13.19 (loses; at 4096 it wins). Hence the k-tiles it needs per row range (rows up to the key): 32
#   rows 48, 33-64 32 (the split into slots it replaces pays a second kernel), 65-96 48, 97-128 64.
#   A fourth call below 32 rows, against the swap-AB BN 128 split 4 into slots (gemm-g14-below32-*.json, bf16, us): 24
#   rows (n24) 10.88 / 10.94 -> 9.90 / 9.88 (0.78-0.79 -> 0.86), 20 rows (n24) 10.91 -> 10.16 (0.78 -> 0.84; n32 12.06
#   loses: rows past M), 28 rows (n32) 11.13 -> 10.33 (0.76 -> 0.83); 16 rows even twice (9.45-9.61 -> 9.44, f32 9.32 ->
#   9.31) and 16 x 4096 x 14336 even (42.87 -> 43.34): 16 rows keep the policy, 17-31 rows take the split.
# G23 (gemm-g23-limits-*.json, H100, bf16 out, us): fewer stages per ring are as fast or faster with PUSH=1, 32 rows 4
# stages 9.18 against 8's 9.67-9.80 (6: 9.43), 64 rows 4 stages 10.43-10.73 against 6's 10.68-11.48 (5: 10.64; 3
# lose, 11.36), 80 rows 4 stages 11.73 against 5's 11.61-12.18 (3: 12.31); ncu (warm L2): the consumers wait on the
# full mbarriers and the producer on the empty ones at once, i.e. the loads in flight are not what is short. 32-80
# rows take 4 stages; the call after (gemm-g23-stages-*.json), alternated twice with the stages before, bf16 out: 32
# rows 9.52-9.54 -> 8.89-9.06 us (0.89 -> 0.91-0.92), 64 rows 10.48 -> 10.17-10.25 (0.85-0.88 -> 0.87-0.88), 80 rows
# 11.58-11.59 -> 11.02-11.30 (0.81 -> 0.84-0.85); once: 48 rows 10.16 -> 9.90 (0.84 -> 0.86), 72 rows 11.38 -> 11.06.
CLUSTER_SPLIT_STAGES = {8: 8, 16: 8, 24: 8, 32: 4, 48: 4, 64: 4, 80: 4, 96: 4, 104: 4, 112: 4, 128: 4}
# G19 re-timed it with its closing cluster barrier relaxed (H100, gemm-g19-retime-*.json, bf16 out, us, x cuBLAS):
# N = K = 4096 alternated twice with the forms before: 32 rows 10.71-10.78 -> 9.56-9.76 (0.78 -> 0.85-0.86), 64 rows
# 12.80-13.14 -> 11.13-11.16 (0.69-0.72 -> 0.80-0.82), 80 rows 15.71-15.72 -> 12.58-12.59 (0.60-0.61 -> 0.76), 100
# rows 15.83-15.93 -> 14.14-14.15 (0.77-0.78 -> 0.87), 128 rows 15.81-15.91 -> 14.91-14.95 (0.93 -> 0.99); forced at
# fewer k-tiles it now pays from 16 k-tiles at 24-64 rows (32 x 4096 x 1024 6.92 -> 6.08, 64 x 4096 x 1024 7.84 ->
# 6.84, 24 x 4096 x 1536 7.58 -> 6.50), 32 at 80 rows (9.47 -> 8.98), 48 at 100 rows (12.47 -> 11.85; 32: 9.70 ->
# 10.20 loses), 64 at 128 rows (48: 12.46 -> 12.45 even; 32 loses, 9.67 -> 10.77). Below 16 k-tiles: not measured.
# Then the sums exchanged by st.async (PUSH=1, gemm_splitk_swap: each rank's sum pushed into the other's shared memory,
# completing its mbarrier; no cluster barrier after the k-loop, no fence; each rank stores half the tile), alternated
# twice with the barrier exchange (gemm-g19-push-*.json; us, bf16 / f32 out, x cuBLAS): 32 rows 9.52-9.66 / 9.64-9.74
# -> 9.28 / 9.43 (0.84-0.86 -> 0.88-0.89), 64 rows 11.12-11.15 / 11.00-11.07 -> 10.56-10.63 / 10.63 (0.79-0.82 ->
# 0.84-0.88), 80 rows 12.46-12.54 / 12.20-12.66 -> 11.42-11.47 / 11.33-11.43 (0.75-0.77 -> 0.81-0.83), 100 rows (n104)
# 13.49-13.59 / 13.38-13.46 -> 12.22-12.23 / 12.45-12.57 (0.86-0.89 -> 0.95); once: 24 rows 9.89 -> 9.26 (0.90 ->
# 0.94), 48 rows 10.56 -> 10.16 (0.81 -> 0.86), 96 rows 13.35 -> 11.76 with 4 stages (0.75 -> 0.84: the received tile
# leaves room for 4, not 5); 16 rows (n16, this form against the split-4 policy) 9.57 -> 8.51 (0.94 -> 1.06). 112 / 128
# rows fit only 3 stages beside it and lose there (13.89 -> 14.20, 14.19-14.43 -> 14.80-14.87): no push (the barrier
# exchange). At short K it pays from 8 k-tiles at 32 / 64 rows (32 x 4096 x 512 6.38 -> 4.96 against the split into
# slots, 64 x 4096 x 512 6.46 -> 5.51), 24 at 80 rows (7.96 -> 7.08), 32 at 100 rows (9.40 -> 8.78). Below 8: not
# measured. A third call (gemm-g19-confirm-*.json), below 17 rows against the swap-AB split-4 policy there, alternated
# twice: 16 rows (n16) 9.61-9.64 / 9.48-9.61 -> 8.50-8.54 / 8.48-8.49 (0.93-0.96 -> 1.06-1.07), 8 rows (n8) 9.78-9.89
# -> 8.16-8.17 (0.85-0.86 -> 1.03); once: 1 row (n8) 9.92 -> 8.26 (0.92 -> 1.10), 16 x 4096 x 14336 even (43.44 ->
# 43.49, 1.00); so 1-16 rows take it too. With PUSH against the barrier exchange (once): 20 rows 0.89 -> 0.92, 40 rows
# 0.87 -> 0.91, 56 rows 0.82 -> 0.85, 72 rows (f32 out) 0.78 -> 0.85; at short K against the forms before: 48 x 4096 x
# 512 0.49 -> 0.69, 24 x 4096 x 768 0.58 -> 0.75, 96 x 4096 x 1536 0.65 -> 0.69, 104 x 4096 x 2048 0.71 -> 0.78.
# G23 (gemm-g23-xch-k-*.json, bf16 out, us, x cuBLAS): with XCH at BM 112 / 128, forced against the policy there (K_WAYS
# over two shifted 64-row tiles), alternated twice: 112 x 4096 x 2048 (32 k-tiles) 9.56 / 9.62 -> 8.38 / 8.35 (0.64-0.66
# -> 0.76), 128 x 4096 x 3072 (48) 12.48 / 12.52 -> 10.74 / 10.77 (0.91-0.92 -> 1.05-1.06); once: 112 x 4096 x 2560
# 11.16 -> 9.21 (0.66 -> 0.81), 128 x 4096 x 2048 9.71 -> 8.92 (0.90 -> 0.98, not adopted: one run). Below 32: not
# measured.
CLUSTER_SPLIT_MIN_K_TILES = {64: 8, 96: 24, 104: 32, 112: 32, 128: 48}
CLUSTER_SPLIT_PUSH_BM = 104     # PUSH=1 up to this BM (its received tile beside CLUSTER_SPLIT_STAGES' stages)
# past it (BM 112 / 128), PUSH=1 with XCH=1: the hand-over and received tiles in one, so 4 stages fit beside it (G23;
# gemm-g23-stages-*.json, alternated twice with the barrier exchange's 4 stages, us, x cuBLAS: 112 rows 13.79-13.83 ->
# 11.89-12.08 (0.75 -> 0.86), f32 out 13.88 -> 12.17 (0.74 -> 0.84); 128 rows 14.47-14.81 -> 12.64-12.65 (0.99-1.00 ->
# 1.14)). Its K thresholds: CLUSTER_SPLIT_MIN_K_TILES above.
# G27 (H100; every figure over rotated input sets, B from DRAM as in a model's decode step, METHOD.md; bf16 out, us, x
# cuBLAS; gemm-g27-rowtiles{,2}-*.json): the split's 1.14 at 128 rows was an L2-resident B (0.87 rotated). At 97-128
# rows two unsplit 64-row tiles (SWAP_KWAYS: 128 blocks, each streaming all of K, the second row tile's B from the L2)
# beat it: 128 rows 17.75-18.31 -> 17.08-17.88 (0.87 -> 0.90-0.91, alternated twice in each of two calls; f32 out
# 18.39 -> 17.56), 112 rows 17.25-17.35 -> 16.98-17.03 (0.87 -> 0.88, twice), 120 rows 17.74 -> 17.07 (0.91 -> 0.94),
# 100 rows 17.65 -> 17.05 (0.85 -> 0.88), 128 x 4096 x 14336 46.16 -> 45.72 (1.14, even); with one set (B in the L2)
# the split stays faster (128 rows 12.8-13.4 against 15.7-16.3): taken on the rotated figures. At 96 rows two 48-row
# tiles (7 stages) beat it too: 17.41 -> 16.33, 18.26-18.29 -> 17.43-17.52, 17.20 -> 16.35 (0.86-0.88 -> 0.91-0.92,
# four alternations in three calls; f32 out 17.43 -> 16.57), 88 rows 17.24-17.36 -> 16.07-16.51 (0.86 -> 0.91-0.92,
# twice), 96 x 4096 x 1024 against SWAP_KWAYS's 64-row tiles 7.96 -> 7.85; 80 rows 17.72 -> 17.29 (0.90 -> 0.92, once:
# not taken). So the cluster split runs to 80 rows;
# `cluster_split` still gives its 81-128-row forms (XCH past BM 104) to callers that ask.
CLUSTER_SPLIT_MAX_M = 80
# 129-256 rows whose 64-column tiles, two row tiles of them, fill half a wave to one: two unsplit row tiles of BM =
# M / 2 rounded up to n80 / n96 / n112 / n128 (K_WAYS=2 swap-AB: cuBLAS's 64 x M/2 tiles of C^T, less its clusters),
# M_SHIFT at BM 128 only (the shifted store's row mask needs a power-of-two BM; below it, the last tile's rows past M
# are zeros in A's box). G27, against 128 x 128 tiles split 2 into slots + splitk_sum (129-224 rows) and 64 x 128 tiles
# in 2x1 clusters (225-256): 160 rows 25.36 -> 18.48 (0.63 -> 0.87), 192 rows 23.73-24.43 -> 19.26-19.40 (0.70 ->
# 0.88-0.89, twice; f32 out 24.67 -> 19.63, 0.70 -> 0.89), 224 rows 24.54 -> 20.56 (0.74 -> 0.88), 256 rows
# 21.55-22.53 -> 21.13-21.93 (twice in each of two calls; cuBLAS 17.2-19.9 in those runs: 0.78-0.90 -> 0.81-0.88).
# Stages: 192 rows 5 19.26-19.40, 4 19.99. A call after the change (gemm-g27-policy-*.json) against the forms before at
# rows call 3 had not timed: 136 rows 27.20-28.55 -> 19.15-19.17 (0.61-0.64 -> 0.90, twice), 200 rows 25.88 -> 21.62
# (0.76 -> 0.92), 250 rows 23.04 -> 22.30 (0.93 -> 0.96), 192 x 4096 x 1024 14.32 -> 9.89 (0.53 -> 0.77).
# The same form at 81-128 rows: BM 48 (7 stages, unshifted) at 81-96 rows, SWAP_KWAYS's BM 64 at 97-128 (above).
ROW_TILES2_STAGES = {48: 7, 64: 6, 80: 5, 96: 5, 112: 4, 128: 4}


def row_tiles2(M: int, N: int, K: int) -> dict | None:
    """G27's form for 81-256 rows (above): two unsplit row tiles, K_WAYS=2 swap-AB; None where it does not apply."""
    if not CLUSTER_SPLIT_MAX_M < M <= 256 or not NUM_SMS // 2 < 2 * _cdiv(N, 64) <= NUM_SMS:
        return None
    bm = min(b for b in ROW_TILES2_STAGES if 2 * b >= M)
    return dict(SWAP_KWAYS, BM=bm, STAGES=ROW_TILES2_STAGES[bm], M_SHIFT=int(bm in (64, 128)),
                INSTR=getattr(tp.nv, f"wgmma_m64n{bm}k16_bf16"))


def cluster_split(M: int, N: int, K: int) -> dict | None:
    """The CLUSTER_K=2 form (above) for an (M, N, K) GEMM, or None where it does not apply."""
    if (not 1 <= M <= 128 or not NUM_SMS // 2 < 2 * _cdiv(N, 64) <= NUM_SMS
            or _cdiv(K, 64) < next(v for m, v in CLUSTER_SPLIT_MIN_K_TILES.items() if M <= m)):
        return None
    bm = min(b for b in CLUSTER_SPLIT_STAGES if b >= M)
    return dict(SWAP_AB=1, K_WAYS=2, CONSUMERS=2, BM=bm, BN=64, STAGES=CLUSTER_SPLIT_STAGES[bm], IN_FLIGHT=1,
                SPLIT_K=1, CLUSTER_K=2, INSTR=getattr(tp.nv, f"wgmma_m64n{bm}k16_bf16"),
                PUSH=1, **({} if bm <= CLUSTER_SPLIT_PUSH_BM else {"XCH": 1}))


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def shape_class(M: int, N: int, K: int) -> str:
    """decode (M <= 64), skinny (M <= 256), small (<= 1024^3), unaligned (A's or B's rows not a multiple of 16
    bytes: padded), large."""
    if M <= 64:
        return "decode"
    if M <= 256:
        return "skinny"
    if M * N * K <= 1024 ** 3:
        return "small"
    if (2 * K) % 16 or (2 * N) % 16:
        return "unaligned"
    return "large"


# G31: `launch`'s gemm_hopper / gemm_splitk / gemm_cluster forms copy the operands with TMA only (TMA_ONLY=1: no
# per-element fallback compiled in beside the bulk copies, whose registers ptxas sized the whole block for, as G28
# found in gemm_fp8); `launch` drops it where A's or B's base is not 16-byte aligned (their rows are padded to 16-byte
# multiples already). Only `fixup` + `forms` callers (launch): the lowering launches gemm_hopper on tensors it does not
# check. gemm_splitk_swap and the persistent form's STORE_N copies are TMA only already.
# H100, rotated input sets, TMA_ONLY against the fallback alternated in one process (on / off / on, then off / on / off
# / on; benchmarks/results/gemm-g31*-*.json, us a call, x torch.matmul bf16 / torch.mm(out_dtype=f32) in the same run):
# 512^3 bf16 (64 x 64 relaxed cluster) 5.3 -> 4.5 / 5.3 (0.74 -> 0.81 / 0.82), f32 (64 x 64) 5.2 -> 4.4 / 4.8 (0.78 ->
# 0.93); 640^3 f32 6.1 / 6.2 -> 5.2 / 5.1 (0.79-0.80 -> 0.94-0.95), bf16 5.6 / 5.6 -> 5.5 / 5.4 (0.82-0.83 -> 0.85);
# 768^3 (64 x 128 s8, TMA store) bf16 7.0 -> 6.2 / 6.3 (0.68 -> 0.75), f32 7.6 -> 7.3 / 7.3 (0.66 -> 0.69); even at
# 2048 x 2048 x 1024, 16 x 14336 x 4096, 2051 x 2045 x 1000, the f32 64 x 128 relaxed clusters (1024^3, 1024 x 1024 x
# 2048, 2048 x 512 x 4096) and 3000 x 5000 x 4096 (190-222 us either way: noisy). SLOWER on bf16 out's 64 x 128
# relaxed clusters with the TMA store (SMALL_CLUSTER_BF16; registers 128 -> 95), by a cost growing with K: 1024^3 8.1 /
# 8.3 / 10.2 -> 8.8 / 8.8 / 9.2 / 10.4, 1024 x 1024 x 2048 12.3-12.6 -> 14.0-14.2, 2048 x 512 x 4096 21.2-21.3 ->
# 23.9-24.0 (1000 x 1000 x 4096 even, 25.1 -> 24.4 / 25.1): that form keeps the fallback (`_fallback_kept`; not
# understood: no occupancy change, one block an SM by shared memory either way).
LAUNCH_TMA_ONLY = True


def policy(M: int, N: int, K: int, out=None, fixup: bool = False, forms: bool = True) -> dict:
    """`_policy` (below), plus TMA_ONLY=1 for the forms only `launch` runs (`fixup` and `forms`) on gemm_hopper,
    gemm_splitk or gemm_cluster (LAUNCH_TMA_ONLY above)."""
    p = _policy(M, N, K, out, fixup, forms)
    if (fixup and forms and LAUNCH_TMA_ONLY and not p.get("SWAP_AB") and not p.get("PERSISTENT")
            and not _fallback_kept(p)):
        p = {**p, "TMA_ONLY": 1}
    return p


def _fallback_kept(p: dict) -> bool:
    """The form that keeps the per-element fallback: bf16 out's 64 x 128 tiles in relaxed 2x1 clusters with the TMA
    store (SMALL_CLUSTER_BF16), where TMA_ONLY measured SLOWER by a cost growing with K (G31, above)."""
    return clustered(p) and bool(p.get("RELAXED")) and p.get("BN") == 128 and p.get("EPILOGUE") == 2


def _policy(M: int, N: int, K: int, out=None, fixup: bool = False, forms: bool = True) -> dict:
    """The constexprs for an (M, N, K) GEMM: the shape class's policy (and, for `out` = tp.bf16, its bf16-output
    entries), plus SPLIT_K where the output tiles alone fill less than half the SMs and K has enough k-tiles to
    share (each split keeps >= 4). `fixup`: a split gets the class's reduction from SPLIT_FIXUP (FIXUP 1-3:
    gemm_splitk, which takes a workspace and tickets that `launch` keeps); without it (a caller that launches
    gemm_hopper itself, the lowering) the split adds into a target the caller zeroes. With `fixup` and `forms`, the
    kernel forms only `launch` runs: swap-AB for decode and skinny rows (SWAP_DECODE, SWAP_KWAYS, cluster_split,
    row_tiles2 above), 2x1 clusters for B rows off 128-byte lines, and gemm_cluster RELAXED=1 for the small class's
    bf16 64 x 64 rows and its 64 x 128 rows of >= 16 k-tiles (SMALL_64x64_CLUSTER_BF16, SMALL_CLUSTER_F32 /
    SMALL_CLUSTER_BF16)."""
    cls = shape_class(M, N, K)
    p = {**PRESETS["sm_90a"], **POLICIES[cls]}
    if fixup and forms and M <= CLUSTER_SPLIT_MAX_M and cluster_split(M, N, K) is not None:
        return {**p, **cluster_split(M, N, K)}    # K split over a cluster's two blocks, one row tile (above)
    if cls == "decode" and fixup and forms and M <= 32:
        sw = {**p, "SWAP_AB": 1, "BN": 128, "CONSUMERS": 2, "IN_FLIGHT": 1,
              **SWAP_DECODE[16 if M <= 16 else 32 if M == 32 else "17-31"]}
        tiles = _cdiv(M, sw["BM"]) * _cdiv(N, sw["BN"])
        split = min(NUM_SMS // tiles, _cdiv(K, sw["BK"]) // 4, MAX_SLOTS) if 2 * tiles <= NUM_SMS else 1
        if split > 1:
            return {**sw, "SPLIT_K": split, "FIXUP": 3}
    if cls == "skinny" and fixup and forms and row_tiles2(M, N, K) is not None:
        return {**p, **row_tiles2(M, N, K)}     # two unsplit row tiles of C^T, alternate k-tiles (G27, above)
    if (cls == "skinny" and fixup and forms and M <= 128
            and NUM_SMS // 2 < _cdiv(M, 64) * _cdiv(N, 64) <= NUM_SMS):
        return {**p, **SWAP_KWAYS}     # two consumers over one 64 x 64 tile of C^T, alternate k-tiles (above)
    fix_cls = cls
    if (cls == "skinny" and fixup and M > 128 and SPLIT_FIXUP.get("skinny_128x128") and _cdiv(K, 64) >= 8
            and NUM_SMS // 3 < _cdiv(M, 128) * _cdiv(N, 128) <= NUM_SMS // 2):
        # 129-256 rows whose 128 x 128 tiles fill a third to a half of the SMs: those tiles, 6 stages, split 2 with
        # FIXUP=3 (B read twice instead of four times by 64 x 128 tiles): 256 x 4096 x 4096 bf16 / f32 out 26.5 /
        # 26.1 us -> 24.9 / 25.6, 200 x 4096 x 4096 26.0 / 26.0 -> 24.1 / 24.9 (gemm-g6-wide-*.json, one run; with the
        # passes instead of FIXUP=3 it is slower than the unsplit 64 x 128 tiles, 31.6 / 27.5: `fixup` callers only)
        p.update(STAGES=6)
        fix_cls = "skinny_128x128"
    elif cls == "skinny" and NUM_SMS // 2 < _cdiv(M, 64) * _cdiv(N, 128) <= NUM_SMS:
        # 64 x 128 tiles fill one wave without a split: 256 x 4096 x 4096 bf16 out 30.9 us with 128 x 128 split-K 2
        # -> 26.6 (0.56 -> 0.71x cuBLAS), f32 out 27.0 -> 26.2 (benchmarks/results/gemm-fixup-*.json)
        p.update(POLICIES["decode"])
    elif cls == "skinny" and 2 * _cdiv(M, 64) * _cdiv(N, 128) <= NUM_SMS:
        # 64 x 128 tiles in at most half a wave: split over K as the decode class, 4 stages, the registers capped
        # for two blocks per SM (MIN_BLOCKS=2): 128 x 4096 x 4096 (split 2) bf16 out 21.4-22.5 us with 128 x 128
        # tiles split 4 -> 20.9 (passes) / 18.0 (FIXUP=3); f32 out 19.3-19.9 -> 18.5 / 19.0 (gemm-g6-skinny-*.json)
        p.update(POLICIES["decode"], STAGES=4, MIN_BLOCKS=2)
        fix_cls = "skinny_64x128"
    if out == tp.bf16:
        p.update(BF16_OUT.get(cls, {}))
    else:
        p.update(F32_OUT.get(cls, {}))
    if cls == "small" and 2 * _cdiv(M, 64) * _cdiv(N, 128) <= NUM_SMS and _cdiv(K, 64) <= 16:
        if out == tp.bf16 and fixup and forms:
            return {**p, **SMALL_64x64_CLUSTER_BF16}    # (G22, above)
        return {**p, **SMALL_64x64}     # few 64 x 128 tiles, short K: twice the tiles, no split (G16, above)
    if (cls == "small" and fixup and forms and 2 * _cdiv(M, 64) * _cdiv(N, 128) > NUM_SMS
            and _cdiv(K, 64) >= SMALL_CLUSTER_MIN_K_TILES):
        # 64 x 128 tiles in relaxed clusters: f32 out (G22), bf16 out through the TMA store (G29, above)
        return {**p, **(SMALL_CLUSTER_BF16 if out == tp.bf16 else SMALL_CLUSTER_F32)}
    if (cls == "large" and 2 * _cdiv(M, 128) * _cdiv(N, 256) <= NUM_SMS
            and not NUM_SMS * 3 // 4 < _cdiv(M, 128) * _cdiv(N, 128) <= NUM_SMS
            and NUM_SMS * 3 // 4 < _cdiv(M, 64) * _cdiv(N, 128) <= NUM_SMS):
        # the small class's 64 x 128 tiles in one wave instead of 128 x 256 tiles split over K (G16, above)
        small = {**PRESETS["sm_90a"], **POLICIES["small"]}
        if (fixup and forms and _cdiv(K, 64) >= SMALL_KWAYS_MIN_K_TILES and (2 * N) % 128 == 0 and (2 * K) % 128 == 0
                and _cdiv(M, SMALL_KWAYS["BM"]) <= _cdiv(N, SMALL_KWAYS["BN"])
                and _cdiv(M, SMALL_KWAYS["BM"]) * _cdiv(N, SMALL_KWAYS["BN"]) <= NUM_SMS):
            return {**small, **SMALL_KWAYS}     # 128 x 64, two consumers on alternate k-tiles (G29, above)
        if fixup and forms and _cdiv(K, 64) >= SMALL_CLUSTER_MIN_K_TILES:
            return {**small, **(SMALL_CLUSTER_BF16 if out == tp.bf16 else SMALL_CLUSTER_F32)}    # (G22, G29, above)
        return {**small, **(BF16_OUT if out == tp.bf16 else F32_OUT)["small"]}
    if (cls == "large" and 2 * _cdiv(M, 128) * _cdiv(N, 256) <= NUM_SMS
            and NUM_SMS * 3 // 4 < _cdiv(M, 128) * _cdiv(N, 128) <= NUM_SMS):
        # mid-size: 128 x 128 tiles in (most of) one wave instead of 128 x 256 tiles split over K (MID_128x128 above;
        # measured at 128 such tiles; fewer would leave SMs idle where the split kept them busy: not measured)
        for k in ("PRODUCER_REGS", "CONSUMER_REGS"):
            p.pop(k, None)
        p.update(SMALL_TILE, IN_FLIGHT=0, **MID_128x128[tp.bf16 if out == tp.bf16 else tp.f32])
        return p
    if cls == "large" and fixup and forms and (2 * N) % 128 and 2 * _cdiv(M, 128) * _cdiv(N, 256) > NUM_SMS:
        p["CLUSTER_M"] = 2   # B rows that are not whole 128-byte lines: multicast B in 2x1 clusters (above)
        if out != tp.bf16 and _cdiv(M, p["BM"]) % 4 == 0:
            p.update(UNALIGNED_B_F32)    # f32 out: clusters of 4, 64 / 216 registers (above)
    if cls == "large" and out == tp.bf16 and 2 * M * K > L2_BYTES and _cdiv(M, p["BM"]) > LARGE_GROUP_M:
        p["GROUP_M"] = LARGE_GROUP_M   # A overflows the L2: the grouped tile order (above; gemm_cluster ignores it)
    if (cls == "large" and out in (tp.bf16, tp.f32) and fixup and forms and not clustered(p)
            and _cdiv(M, p["BM"]) * _cdiv(N, p["BN"]) > NUM_SMS):
        # the persistent grid, the TMA store overlapped with the next tile (LARGE_PERSISTENT above); GROUP_M 16 where
        # A overflows the L2 (measured the same as 8 there: 8192^3 1.017 / 1.014, 4096 x 4096 x 14336 0.996 / 0.997);
        # f32 out in 32-column pieces through two buffers, the last two held (LARGE_PERSISTENT_F32, G18 / G26)
        p.pop("IN_FLIGHT", None)
        pers = LARGE_PERSISTENT if out == tp.bf16 else LARGE_PERSISTENT_F32
        return {**p, **pers, "GROUP_M": p.get("GROUP_M", pers["GROUP_M"])}
    if (cls == "skinny" and out == tp.bf16 and M <= 128 and (p["BM"], p["BN"]) == (128, 128)
            and NUM_SMS // 2 < _cdiv(N, 128) <= NUM_SMS):
        # one row of 128 x 128 tiles filling half a wave to one (128 x 14336 x 4096: 112 blocks): 5 stages, not 4 (G27,
        # rotated, bf16 out, alternated twice: 47.63-47.66 -> 46.49 us, 0.95-0.96 -> 0.97-0.98x cuBLAS; 6 stages 48.38)
        p["STAGES"] = 5
    tiles = _cdiv(M, p["BM"]) * _cdiv(N, p["BN"])
    k_tiles = _cdiv(K, p["BK"])
    split = 1
    if 2 * tiles <= NUM_SMS:
        split = max(1, min(NUM_SMS // tiles, k_tiles // 4))
    if split > 1:
        p["SPLIT_K"] = split
        f = SPLIT_FIXUP.get(fix_cls, 0) if fixup else 0
        if f and not (f in (2, 3) and split > MAX_SLOTS):   # (the slots' sums are unrolled over the splits)
            p["FIXUP"] = f
    return p


def grid_of(M: int, N: int, params: dict) -> tuple:
    if params.get("PERSISTENT"):
        return (min(_cdiv(M, params["BM"]) * _cdiv(N, params["BN"]), params.get("NUM_SMS", NUM_SMS)),)
    return (_cdiv(M, params["BM"]), _cdiv(N, params["BN"]), params.get("SPLIT_K", 1) * params.get("CLUSTER_K", 1))


def _other_tile(pol: dict, given: dict) -> bool:
    """Whether a caller's constexprs change the policy's tile shape or add stages: the policy's staged epilogue
    (a BM x BN shared tile beside the ring) was sized for its own tile, and is not inherited by another."""
    return (any(given.get(k, pol.get(k)) != pol.get(k) for k in ("BM", "BN", "BK"))
            or given.get("STAGES", pol.get("STAGES", 0)) > pol.get("STAGES", 0))


def _other_block(pol: dict, given: dict) -> bool:
    """Whether a caller's constexprs change the block the policy sized: its tile, stages, warpgroups, instruction
    or register budgets."""
    return any(given.get(k, pol.get(k)) != pol.get(k)
               for k in ("BM", "BN", "BK", "STAGES", "CONSUMERS", "INSTR", "PRODUCER_REGS", "CONSUMER_REGS"))


PERSISTENT_ONLY = ("GROUP_M",)         # constexprs of gemm_persistent (and gemm_hopper's grouped order) alone
# constexprs of gemm_hopper / gemm_splitk alone
STEADY_ONLY = ("IN_FLIGHT", "SPLIT_K", "EPILOGUE", "B_SWIZZLE", "FIXUP", "MIN_BLOCKS", "SLOT_ROWS")
CLUSTER_ONLY = ("CLUSTER_M", "RELAXED")                  # gemm_cluster's (CLUSTER_M > 1 picks it)
# gemm_splitk_swap's constexprs (SWAP_AB=1 picks it)
SWAP_KEYS = ("BM", "BN", "BK", "STAGES", "CONSUMERS", "INSTR", "SWIZZLE", "SPLIT_K", "IN_FLIGHT", "CLUSTER_M", "B_NK",
             "K_WAYS", "M_SHIFT", "CLUSTER_K", "PUSH", "XCH", "CLUSTER_N", "RELAXED")


def clustered(params: dict) -> bool:
    return params.get("CLUSTER_M", 1) > 1


def fixed_up(params: dict) -> bool:
    """Whether these constexprs run split-K with the reduction in the kernel (gemm_splitk: SPLIT_K > 1 and
    FIXUP 1 or 2) rather than gemm_hopper's atomics into a zeroed target (FIXUP 0); gemm_splitk_swap's split
    (SWAP_AB=1, clustered or not) stores FIXUP=3's slots."""
    return params.get("SPLIT_K", 1) > 1 and params.get("FIXUP", 0) > 0 and not params.get("PERSISTENT") \
        and (not clustered(params) or bool(params.get("SWAP_AB")))


def kernel_params(params: dict) -> dict:
    """The constexprs the chosen kernel takes: `PERSISTENT` (and `NUM_SMS`, the grid cap) pick gemm_persistent
    and are not its own; gemm_persistent keeps the wgmma group synchronous and has no split-K. CLUSTER_M > 1
    picks gemm_cluster (wait_group 0, no split-K, EPILOGUE 0 or 2). SPLIT_K > 1 with FIXUP 1 / 2 picks
    gemm_splitk (no EPILOGUE of its own); FIXUP is nobody else's. SWAP_AB=1 picks gemm_splitk_swap (C^T = B^T A^T,
    split-K into FIXUP=3's slots (SPLIT_K > 1 needs FIXUP=3), or unsplit (SPLIT_K=1: C stored by the kernel), in
    clusters of CLUSTER_M row tiles sharing B's tile (multicast) or not)."""
    if params.get("SWAP_AB"):
        if (params.get("SPLIT_K", 1) > 1 and params.get("FIXUP") != 3) or params.get("PERSISTENT"):
            raise ValueError(f"gemm_hopper: SWAP_AB=1 (gemm_splitk_swap) runs split-K into slots summed by splitk_sum "
                             f"(SPLIT_K > 1 needs FIXUP=3) or no split (SPLIT_K=1), never PERSISTENT (got SPLIT_K="
                             f"{params.get('SPLIT_K', 1)}, FIXUP={params.get('FIXUP')}); pass SPLIT_K=1, or "
                             f"SPLIT_K=2..8 with FIXUP=3")
        if params.get("K_WAYS", 1) not in (1, 2) or (params.get("K_WAYS", 1) == 2 and (
                params.get("CONSUMERS") != 2 or params.get("BN", 0) % 64)):
            raise ValueError(f"gemm_hopper: K_WAYS=2 (gemm_splitk_swap: two consumer warpgroups over one tile, "
                             f"alternate k-tiles) needs CONSUMERS=2 and BN a multiple of 64 (got K_WAYS="
                             f"{params.get('K_WAYS')}, CONSUMERS={params.get('CONSUMERS')}, BN={params.get('BN')}); "
                             f"K_WAYS is 1 or 2")
        if params.get("CLUSTER_K", 1) != 1 and (params.get("CLUSTER_K") != 2 or params.get("K_WAYS", 1) != 2
                                                or params.get("SPLIT_K", 1) != 1 or clustered(params)):
            raise ValueError(f"gemm_hopper: CLUSTER_K=2 (gemm_splitk_swap: K split over the two blocks of a cluster, "
                             f"summed through distributed shared memory) needs K_WAYS=2, SPLIT_K=1 and CLUSTER_M=1 "
                             f"(got CLUSTER_K={params.get('CLUSTER_K')}, K_WAYS={params.get('K_WAYS', 1)}, SPLIT_K="
                             f"{params.get('SPLIT_K', 1)}, CLUSTER_M={params.get('CLUSTER_M', 1)}); CLUSTER_K is 1 "
                             f"or 2")
        cn = params.get("CLUSTER_N", 1)
        if cn != 1 and (cn not in (2, 4) or params.get("K_WAYS", 1) != 2 or clustered(params)
                        or params.get("CLUSTER_K", 1) != 1):
            raise ValueError(f"gemm_hopper: CLUSTER_N (gemm_splitk_swap: clusters of adjacent column tiles sharing "
                             f"A's tile by multicast) is 1, 2 or 4 and needs K_WAYS=2 with CLUSTER_M=1 and CLUSTER_K=1 "
                             f"(got CLUSTER_N={cn}, K_WAYS={params.get('K_WAYS', 1)}, CLUSTER_M="
                             f"{params.get('CLUSTER_M', 1)}, CLUSTER_K={params.get('CLUSTER_K', 1)})")
        if params.get("RELAXED") and (params.get("K_WAYS", 1) != 2 or (not clustered(params) and cn == 1)):
            raise ValueError(f"gemm_hopper: RELAXED=1 with SWAP_AB=1 (gemm_splitk_swap: the relaxed opening cluster "
                             f"barrier, the producer's tail in place of the closing one) needs K_WAYS=2 and a cluster "
                             f"(CLUSTER_M or CLUSTER_N > 1); got K_WAYS={params.get('K_WAYS', 1)}, CLUSTER_M="
                             f"{params.get('CLUSTER_M', 1)}, CLUSTER_N={cn}")
        if params.get("PUSH") and params.get("CLUSTER_K", 1) != 2:
            raise ValueError(f"gemm_hopper: PUSH=1 (gemm_splitk_swap: the cluster split's sums exchanged by st.async) "
                             f"needs CLUSTER_K=2 (got CLUSTER_K={params.get('CLUSTER_K', 1)})")
        if params.get("XCH") and not params.get("PUSH"):
            raise ValueError(f"gemm_hopper: XCH=1 (gemm_splitk_swap: the pushed exchange's two tiles in one) needs "
                             f"PUSH=1 (got PUSH={params.get('PUSH', 0)})")
        return {**{k: v for k, v in params.items() if k in SWAP_KEYS}, "SPLIT_K": params.get("SPLIT_K", 1)}
    if clustered(params):
        bad = {k: params[k] for k in ("IN_FLIGHT", "SPLIT_K", "B_SWIZZLE", "PERSISTENT", "MIN_BLOCKS")
               if params.get(k, 0) not in
               (0, 1 if k == "SPLIT_K" else 0)}
        if params.get("EPILOGUE", 0) not in (0, 2):
            bad["EPILOGUE"] = params["EPILOGUE"]
        if bad:
            raise ValueError(f"gemm_hopper: CLUSTER_M > 1 (gemm_cluster) runs wait_group 0, no split-K, no persistent "
                             f"grid and EPILOGUE 0 or 2; {bad} needs CLUSTER_M=1")
        return {k: v for k, v in params.items()
                if k not in PERSISTENT_ONLY + ("IN_FLIGHT", "SPLIT_K", "B_SWIZZLE", "PERSISTENT", "NUM_SMS", "FIXUP",
                                               "MIN_BLOCKS", "SLOT_ROWS")}
    params = {k: v for k, v in params.items() if k not in CLUSTER_ONLY}
    if not params.get("PERSISTENT"):
        if fixed_up(params):
            if params["FIXUP"] not in (1, 2, 3):
                raise ValueError(f"gemm_hopper: FIXUP is 0 (atomics into a zeroed target), 1 (atomics into a "
                                 f"workspace, reduced in the kernel), 2 (workspace slots, reduced in the kernel) or 3 "
                                 f"(workspace slots, summed by a second kernel), not {params['FIXUP']!r}")
            drop = PERSISTENT_ONLY + ("PERSISTENT", "NUM_SMS", "EPILOGUE")
        else:
            drop = ("PERSISTENT", "NUM_SMS", "FIXUP", "SLOT_ROWS")    # (gemm_hopper takes GROUP_M too)
        return {k: v for k, v in params.items() if k not in drop}
    for k in STEADY_ONLY:
        v = params.get(k, 0)
        if (v not in (0, 1) if k == "SPLIT_K" else v not in (0, 2) if k == "EPILOGUE" else bool(v)):
            raise ValueError(f"gemm_hopper: PERSISTENT=1 runs wait_group 0 without split-K, the staged copy "
                             f"epilogue (EPILOGUE=1) or a B swizzle of its own; {k}={v!r} needs the non-persistent "
                             f"kernel (PERSISTENT=0)")
    store_n, bn = params.get("STORE_N", 0), params.get("BN", PRESETS["sm_90a"]["BN"])
    bufs = params.get("STORE_BUFS", 2)
    if store_n and (params.get("EPILOGUE") != 2 or bn % (bufs * store_n)):
        raise ValueError(f"gemm_hopper: STORE_N={store_n} stores the tile in column pieces through {bufs} buffers "
                         f"(STORE_BUFS): it needs EPILOGUE=2 and a whole number of rounds of the buffers (BN={bn} a "
                         f"multiple of {bufs * store_n}); got EPILOGUE={params.get('EPILOGUE', 0)}")
    if params.get("STORE_SPAN", 0) not in (0, 32, 64, 128) or (params.get("STORE_SPAN") and not store_n):
        raise ValueError(f"gemm_hopper: STORE_SPAN (the store buffers' column blocks, bytes) is 32, 64 or 128 (0: a "
                         f"piece's row, at most 128) and needs STORE_N > 0; got STORE_SPAN={params['STORE_SPAN']!r}, "
                         f"STORE_N={store_n}")
    if params.get("STORE_LOOP") and not store_n:
        raise ValueError("gemm_hopper: STORE_LOOP=1 walks the store pieces in a run-time loop: it needs STORE_N > 0")
    if params.get("DEFER") not in (None, 0, 1, 2):
        raise ValueError(f"gemm_hopper: DEFER is 0, 1 or 2, not {params['DEFER']!r}")
    held = params.get("HELD", 0)
    if held and (not params.get("DEFER") or not store_n or not 1 <= held <= bn // store_n - bufs
                 or bn % (held * store_n)):
        raise ValueError(f"gemm_hopper: HELD={held} holds the tile's last {held} pieces in registers under DEFER: it "
                         f"needs DEFER 1 or 2, STORE_N > 0, 1 <= HELD <= BN // STORE_N - STORE_BUFS and HELD x "
                         f"STORE_N dividing BN (a register window of the accumulator); got DEFER="
                         f"{params.get('DEFER', 0)}, STORE_N={store_n}, STORE_BUFS={bufs}, BN={bn}")
    if params.get("DEFER") and not held and (not store_n or bn != 2 * bufs * store_n):
        raise ValueError(f"gemm_hopper: DEFER=1 holds the second half of the tile's STORE_N pieces in registers: it "
                         f"needs EPILOGUE=2, STORE_N > 0 and BN = 2 x STORE_BUFS x STORE_N (got STORE_N={store_n}, "
                         f"STORE_BUFS={bufs}, BN={bn})")
    keep = {k: v for k, v in params.items() if k not in STEADY_ONLY + ("PERSISTENT", "NUM_SMS")}
    if params.get("EPILOGUE"):      # EPILOGUE=2: the TMA store overlapped with the next tile
        keep["EPILOGUE"] = params["EPILOGUE"]
    return keep


_VARIANTS: dict = {}
# gemm_splitk_swap registers itself here when imported (the package imports it): it builds on this module's
# pieces (_threads, b_layout, splitk_sum), so importing it from here would make the two modules import each other
SWAP_KERNELS: dict = {}


def kernel_for(out, pad_a: bool = False, pad_b: bool = False, persistent: bool = False, cluster: bool = False,
               splitk: bool = False, swap: bool = False):
    """gemm_hopper (or gemm_persistent, gemm_cluster, gemm_splitk, gemm_splitk_swap) retyped for the output dtype
    and for padded operands: a padded A is (M, KA) with KA >= K (its extra columns zero; k_tiles follows A), a padded
    B is (K, NB) with NB >= N (extra columns zero, never stored: C's bounds mask them)."""
    key = (out, pad_a, pad_b, persistent, cluster, splitk, swap)
    k = _VARIANTS.get(key)
    if k is None:
        ann = {}
        if pad_a:
            ann["A"] = tp.Tensor[tp.bf16, "M", "KA"]
        if pad_b:
            ann["B"] = tp.Tensor[tp.bf16, "K", "NB"]
        if out == tp.bf16:
            ann["C"] = tp.Tensor[tp.bf16, "M", "N"]
        base = gemm_cluster if cluster else gemm_persistent if persistent else gemm_splitk if splitk else gemm_hopper
        if swap:
            base = SWAP_KERNELS["gemm_splitk_swap"]
        k = _VARIANTS[key] = base.retyped(**ann) if ann else base
    return k


def plan_kernel(M: int, N: int, out, params: dict, K: int | None = None):
    """(kernel, its constexprs) that `launch` runs for these constexprs (N and K: which operands are padded;
    split-K without the in-kernel fix-up accumulates in f32 whatever the output)."""
    split = params.get("SPLIT_K", 1) > 1 and not fixed_up(params)
    span, store_n = params.get("STORE_SPAN", 0), params.get("STORE_N", 0)
    if span and params.get("PERSISTENT") and store_n * (4 if out == tp.f32 else 2) % span:
        raise ValueError(f"gemm_hopper: STORE_SPAN={span} bytes must divide a store piece's row (STORE_N={store_n} "
                         f"columns of {out}); pass a smaller STORE_SPAN or 0")
    pad_a = K is not None and (2 * K) % 16 != 0
    kernel = kernel_for(tp.f32 if split else out, pad_a, (2 * N) % 16 != 0, bool(params.get("PERSISTENT")),
                        clustered(params), fixed_up(params), bool(params.get("SWAP_AB")))
    return kernel, kernel_params(params)


def workspace_shapes(M: int, N: int, params: dict) -> tuple:
    """gemm_splitk's (WS, LOCKS) shapes: FIXUP=1 sums into an (M, N) f32 workspace, FIXUP=2 keeps SPLIT_K slots
    of cdiv(M, BM) * BM rows; one ticket per output tile."""
    gm, gn = _cdiv(M, params["BM"]), _cdiv(N, params["BN"])
    if params.get("SWAP_AB"):   # a cluster's grid is rounded up to whole clusters: a slot for every row tile
        gm = _cdiv(gm, params.get("CLUSTER_M", 1)) * params.get("CLUSTER_M", 1)
    ws = (M, N) if params["FIXUP"] == 1 else (params["SPLIT_K"] * gm * params["BM"], N)   # 2, 3: slots
    return ws, (gm * gn,)


class _Plan:
    """One (shape, output dtype, constexprs) call of `launch`, worked out once: the kernel, its grid and
    constexprs, which operands are padded, and the buffers (padded copies, the split-K f32 workspace, the
    fix-up's workspace and tickets) reused by later calls on the same device. The fix-up's buffers are zeroed
    once, when allocated; every call leaves them zero again (so calls of one plan on two streams at once would
    share them: launch's callers run one stream)."""

    __slots__ = ("launcher", "params", "pad_a", "pad_b", "split", "fixup", "out", "bufs", "shapes", "summer")

    def __init__(self, M, N, K, out, params):
        kernel, self.params = plan_kernel(M, N, out, params, K)
        self.pad_a, self.pad_b = (2 * K) % 16 != 0, (2 * N) % 16 != 0
        self.fixup = fixed_up(params)
        self.split = params.get("SPLIT_K", 1) > 1 and not self.fixup
        self.shapes = workspace_shapes(M, N, params) if self.fixup else None
        if params.get("SWAP_AB") and not self.fixup:   # unsplit swap-AB stores C itself: WS / LOCKS unused
            self.fixup, self.shapes = True, ((1, 1), (1,))
        self.out = out
        self.launcher = kernel[grid_of(M, N, params)]
        self.summer = None
        if self.fixup and params.get("FIXUP") == 3 and params.get("SPLIT_K", 1) > 1:   # the slots' sum, a second launch
            self.summer = (splitk_sum_bf16 if out == tp.bf16 else splitk_sum)[(_cdiv(M, 8), _cdiv(N, 128))]
        self.bufs: dict = {}

    def buffer(self, name, like, shape, dtype, np_dtype=None):
        key = (name, getattr(like, "device", None))
        buf = self.bufs.get(key)
        if buf is None:
            if isinstance(like, np.ndarray):
                buf = np.zeros(shape, np_dtype or np.float32)
            else:
                import torch

                buf = torch.zeros(shape, dtype=dtype, device=like.device)
            self.bufs[key] = buf
        return buf

    def __call__(self, a, b, c, target):
        M, K = a.shape
        N = b.shape[1]
        if self.pad_a:
            ap = self.buffer("a", a, (M, _cdiv(K, 8) * 8), getattr(a, "dtype", None))
            ap[:, :K] = a
            a = ap
        if self.pad_b:
            bp = self.buffer("b", b, (K, _cdiv(N, 8) * 8), getattr(b, "dtype", None))
            bp[:, :N] = b
            b = bp
        if self.fixup:
            is_torch = not isinstance(c, np.ndarray)
            ws = self.buffer("fixup_ws", c, self.shapes[0], _f32(is_torch))
            locks = self.buffer("fixup_locks", c, self.shapes[1], _i32(is_torch), np.int32)
            r = self.launcher(a, b, c, ws, locks, target=target, **self.params)
            if self.summer is not None:
                self.summer(ws, c, SPLIT_K=self.params["SPLIT_K"])
            return r
        if not self.split:
            return self.launcher(a, b, c, target=target, **self.params)
        if self.out == tp.f32:
            c[...] = 0
            return self.launcher(a, b, c, target=target, **self.params)
        import_torch = not isinstance(c, np.ndarray)
        ws = self.buffer("ws", c, tuple(c.shape), _f32(import_torch))
        ws[...] = 0
        r = self.launcher(a, b, ws, target=target, **self.params)
        _round_into(c, ws)
        return r


_PLANS: dict = {}


def launch(a, b, c, target: str = "sm_90a", out_dtype=None, **constexprs):
    """c = a @ b; the output dtype is c's (f32 or bf16; for a float32 numpy c standing for bf16, out_dtype=tp.bf16).
    Constexprs not given come from the shape's policy (`policy(..., fixup=True)`). With SPLIT_K > 1 and FIXUP 1
    or 2 gemm_splitk reduces the parts in the kernel (a workspace and tickets kept by the plan, left zero by every
    call; no other pass), with FIXUP=3 it stores them into slots that `splitk_sum` adds up and rounds (one more
    launch); with FIXUP=0 (a caller's SPLIT_K alone; the policy's split while SPLIT_FIXUP is empty) the kernel
    adds f32 partial tiles atomically: an f32 c is zeroed first; a bf16 c gets them through an f32 workspace,
    rounded once. A's or B's rows that are not a multiple of 16 bytes are copied into zero-padded buffers first
    (TMA needs 16-byte rows). The work per (shapes, dtype, constexprs) is planned once (`_Plan`): a repeated
    call is a dictionary lookup and the kernel's launch."""
    M, K = a.shape
    N = b.shape[1]
    if not isinstance(c, np.ndarray) and not c.is_contiguous():
        # the kernels store a contiguous C: a strided one (a column slice of a wider tensor) gets the product through
        # a contiguous buffer and one copy; its neighbours are untouched
        full = c.new_empty(c.shape)     # every form writes all of C (a split zeroes it first)
        out = launch(a, b, full, target, out_dtype, **constexprs)
        c.copy_(full)
        return c if out is full else out
    if not isinstance(a, np.ndarray) and M * N * K > 1024 ** 3 and not (_tma_storable(a) and _tma_storable(b)):
        # the large class's persistent form (STORE_N) loads through TMA only: an operand a tensor map cannot
        # describe (not contiguous, base off 16 bytes) is copied once into a fresh one
        a, b = (x if _tma_storable(x) else x.clone() if x.is_contiguous() else x.contiguous() for x in (a, b))
    try:
        key = (M, N, K, c.dtype, out_dtype, target, *constexprs.items())
        if M * N * K > 1024 ** 3 and not _tma_storable(c):   # the persistent form's TMA-only store cannot write C
            key += ("C not TMA-storable",)
        if not (_tma_storable(a) and _tma_storable(b)):   # K_WAYS=2's and TMA_ONLY's TMA-only loads cannot read them
            key += ("A / B not TMA-loadable",)
        plan = _PLANS.get(key)
    except TypeError:
        key, plan = None, None
    if plan is None:
        from tilepy.dtypes import from_any

        out = out_dtype or from_any(c.dtype)
        if out not in KERNELS:
            raise ValueError(f"gemm_hopper writes f32 or bf16, not {out}")
        base = policy(M, N, K, out, fixup=True) if target == "sm_90a" else None
        if base is not None and ((constexprs and (base.get("SWAP_AB") or clustered(base) or base.get("PERSISTENT")))
                                 or (base.get("PERSISTENT") and not _tma_storable(c))
                                 or (base.get("K_WAYS", 1) > 1 and not (_tma_storable(a) and _tma_storable(b)))
                                 or (clustered(base) and not _tma_loadable(a, b))):
            # the policy's swap-AB / cluster / persistent form was measured as a whole: a caller's own constexprs are
            # laid over the policy without it (the kernel that form replaced); so is a C that the persistent form's
            # TMA-only store cannot write (not contiguous, base not 16-byte aligned), and an A or B that TMA-only
            # loads cannot read (K_WAYS=2's copies; gemm_cluster's B multicast is TMA only: G31 found a B 2 bytes
            # off 16 refused there)
            base = policy(M, N, K, out, fixup=True, forms=False)
        params = {**base, **constexprs} if base is not None else {**PRESETS[target], **constexprs}
        if "SPLIT_K" in constexprs and "FIXUP" not in constexprs:
            params.pop("FIXUP", None)      # the class's fix-up comes with the class's split, not a caller's
        if "EPILOGUE" not in constexprs and base is not None and _other_tile(base, constexprs):
            params.pop("EPILOGUE", None)   # the staged epilogue's shared tile was sized with the policy's tile
        if base is not None and _other_block(base, constexprs):
            # the register cap for two blocks per SM, and the split's reduction, were chosen (and measured) with
            # the policy's tile: a caller's own tile, warpgroups or stages run without them unless asked for
            for k in ("MIN_BLOCKS", "FIXUP"):
                if k not in constexprs:
                    params.pop(k, None)
        if params.get("TMA_ONLY") and "TMA_ONLY" not in constexprs and not _tma_loadable(a, b):
            params["TMA_ONLY"] = 0      # the policy's TMA-only copies need tensor maps: 16-byte aligned bases
        if constexprs.get("CLUSTER_M", 1) > 1:   # asked for by the caller: the shape's wait_group / split-K /
            # persistent policy yields, and its epilogue where gemm_cluster has no such (1: the staged copy)
            for k in (*STEADY_ONLY, "PERSISTENT"):
                if k not in constexprs and not (k == "EPILOGUE" and params.get(k) in (0, 2)):
                    params.pop(k, None)
        if constexprs.get("PERSISTENT"):
            for k in STEADY_ONLY:
                if k not in constexprs:
                    params.pop(k, None)
        plan = _Plan(M, N, K, out, params)
        if key is not None:
            _PLANS[key] = plan
    return plan(a, b, c, target)


def _tma_storable(c) -> bool:
    """Whether a tensor map can describe C for a TMA-only store (or A / B for TMA-only loads: gemm_splitk_swap
    K_WAYS=2; their rows are padded to 16-byte multiples when not): contiguous, its base 16-byte aligned (the row
    pitch is the large class's, a 16-byte multiple). numpy arrays (the interpreter) always."""
    if isinstance(c, np.ndarray):
        return True
    return bool(c.is_contiguous()) and c.data_ptr() % 16 == 0


def _tma_loadable(a, b) -> bool:
    """Whether the operands the kernel reads can be described by tensor maps (TMA_ONLY's copies): A and B as given, or
    the zero-padded copies `_Plan` makes of rows that are not 16-byte multiples (fresh, aligned)."""
    return all((2 * x.shape[1]) % 16 != 0 or _tma_storable(x) for x in (a, b))


def _f32(is_torch: bool):
    if not is_torch:
        return None
    import torch

    return torch.float32


def _i32(is_torch: bool):
    if not is_torch:
        return None
    import torch

    return torch.int32


def _round_into(c, ws):
    if isinstance(c, np.ndarray):
        from tilepy.dtypes import round_bf16

        c[...] = round_bf16(ws) if c.dtype == np.float32 else ws
    else:
        c.copy_(ws)


def reference(a, b):
    return np.asarray(a, np.float64) @ np.asarray(b, np.float64)


if __name__ == "__main__":
    from tilepy.dtypes import round_bf16

    rng = np.random.default_rng(0)
    a = round_bf16(rng.standard_normal((100, 200)).astype(np.float32))
    b = round_bf16(rng.standard_normal((200, 150)).astype(np.float32))
    c = np.full((100, 150), np.nan, np.float32)
    launch(a, b, c, STAGES=2, **SMALL_TILE)
    ref = reference(a, b)
    print("rel err =", float(np.linalg.norm(c - ref) / np.linalg.norm(ref)))
