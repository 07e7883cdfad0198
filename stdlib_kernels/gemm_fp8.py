"""fp8 GEMM with per-tensor scales on Hopper (sm_90a): C = (A @ B.T) * scale_a * scale_b, the product
`torch._scaled_mm(a, b.t(), scale_a, scale_b, out_dtype=torch.bfloat16)` computes.

* A: e4m3 (M, K), B: e4m3 (N, K) (an nn.Linear weight: both operands K-major, the only form fp8 wgmma reads
  from shared memory), scale_a, scale_b: f32 tensors of one element, C: bf16 (M, N).
* Warp-specialized like `gemm_hopper.py`: warpgroup 0 streams (BM, BK) tiles of A and (BN, BK) tiles of B with
  bulk tensor copies (TMA) into a ring of STAGES shared stages (`full[s]` completes on the bytes); warpgroups
  1..CONSUMERS run wgmma m64nBNk32 e4m3 x e4m3 -> f32 on them, 64 rows each, B reached as its transpose `.T`,
  and release the stage through `empty[s]`. Tile k lives in stage k % STAGES, phase k // STAGES.
* Tiles are 128 bytes of K wide (BK = 128 e4m3) under the 128-byte swizzle (tp.Swizzle(3, 4, 3) on 1-byte
  elements), which is what the copy engine writes and what the wgmma descriptor's 128-byte mode reads.
* The epilogue multiplies the f32 accumulator by scale_a * scale_b (read once per block) and rounds to bf16
  in the store. Output tiles are visited GROUP_M row tiles at a time (L2 reuse of B's columns).
* Tiles past M, N or K are zero-filled by the copies; C's view masks the ragged edge of the store. The copy
  engine needs 16-byte rows, so K must be a multiple of 16 (`launch` says so).

* `gemm_fp8_persistent_tma`: the large class's form (a grid of one block per SM walking the tiles, the scaled tile
  stored through the TMA in 64-column pieces overlapped with the next tile's ring, 4 stages); `gemm_fp8_persistent`
  keeps the store from registers (PERSISTENT=1 without STORE_N).
* Small and mid shapes (G28, `small_form`): gemm_fp8 on 64 x 64 / 64 x 128 / 128 x 128 tiles that fill the SMs, one
  wgmma group in flight, deep rings, the TMA store, and TMA_ONLY=1 (the operands' copies without the per-element
  fallback, which made ptxas size the block's registers for it); G35: 128 x 144 tiles where they fill one wave
  (WAVE_128x144), 192 x 192 tiles over three consumers with the tile staged in shared memory (EPILOGUE=1) where C's
  rows are off 16 bytes (UNALIGNED_N_192x192).
* `gemm_fp8_swap`: the skinny class's form (M <= 256: C^T = B @ A^T, A's rows the instruction's N), split-K summed
  by a second kernel from slots or, with CLUSTER_K, inside the kernel over a thread-block cluster (`swap_policy`);
  K_WAYS=2 puts two consumers on one tile (alternate k-tiles), CLUSTER_M=2 splits the rows over a cluster sharing B
  by multicast (G24); HALF_SUM=1 sums the cluster's split as a reduce-scatter of C's rows, STORE_T=1 stores C's tile
  by one TMA store (G34).

`launch(a, b, scale_a, scale_b, out)` checks shapes and dtypes and picks the constexprs from `policy`.
"""

import numpy as np

import tilepy as tp
from stdlib_kernels.gemm_hopper import _log2, b_layout, splitk_sum_bf16
from stdlib_kernels.gemm_splitk_swap import _recv_layout


def _threads(c):
    return 128 * (1 + c["CONSUMERS"])


def _staged_swizzle(bn: int):
    """EPILOGUE=1's c_s swizzle (bf16 rows of `bn`): a row's 16-byte units XORed with bits of the offset that differ
    over 8 consecutive rows (the row's own for a power of two, the 128-byte lines' for an odd multiple of 64)."""
    sh = _log2(bn) - 3 if bn & (bn - 1) == 0 else 3
    return tp.Swizzle(min(3, sh), 3, sh)


def _staged_pitch(bn: int) -> int:
    """EPILOGUE=1's c_s row pitch (bf16 elements) for a width that `_staged_swizzle` does not serve: an odd number
    of 16-byte units, so rows r .. r + 7 start in 8 distinct bank quads."""
    return bn if bn % 16 == 8 else bn + 8


@tp.kernel(threads=_threads, target="sm_90a")
def gemm_fp8(A: tp.Tensor[tp.e4m3, "M", "K"], B: tp.Tensor[tp.e4m3, "N", "K"], SA: tp.Tensor[tp.f32, "SA"],
             SB: tp.Tensor[tp.f32, "SB"], C: tp.Tensor[tp.bf16, "M", "N"],
             BM: tp.constexpr = 128, BN: tp.constexpr = 256, BK: tp.constexpr = 128, STAGES: tp.constexpr = 4,
             CONSUMERS: tp.constexpr = 2, INSTR: tp.constexpr = tp.nv.wgmma_m64n256k32_e4m3,
             SWIZZLE: tp.constexpr = tp.Swizzle(3, 4, 3), IN_FLIGHT: tp.constexpr = 0, GROUP_M: tp.constexpr = 8,
             PRODUCER_REGS: tp.constexpr = 0, CONSUMER_REGS: tp.constexpr = 0, EPILOGUE: tp.constexpr = 0,
             TMA_ONLY: tp.constexpr = 0, STORE_ALL: tp.constexpr = 0):
    # grouped tile order: GROUP_M row tiles sweep the columns together (any grid of cdiv(M, BM) * cdiv(N, BN)
    # blocks over x and y)
    pid = tp.block_id(0) + tp.num_blocks(0) * tp.block_id(1)
    num_m = tp.cdiv(A.shape[0], BM)
    in_group = GROUP_M * tp.cdiv(B.shape[0], BN)
    first_m = (pid // in_group) * GROUP_M
    group_m = tp.minimum(num_m - first_m, GROUP_M)          # the last group may be short
    m0 = (first_m + (pid % in_group) % group_m) * BM
    n0 = ((pid % in_group) // group_m) * BN
    a_s = tp.shared((BM, BK), tp.e4m3, stages=STAGES, swizzle=SWIZZLE)
    b_s = tp.shared((BN, BK), tp.e4m3, stages=STAGES, swizzle=SWIZZLE)   # K-major: the (N, K) tile
    if EPILOGUE == 2:
        # the TMA store (gemm_hopper's EPILOGUE=2): the consumers write the scaled bf16 tile into c_s (column
        # blocks of 128-byte rows, 128-byte swizzle: what a bulk tensor store reads), the producer warpgroup's
        # first thread stores it with `cp.async.bulk.tensor` and waits for the read before the block exits.
        # (G35) A BN that is not a multiple of 64 (128 x 144: 1536 columns in 11 tiles) takes column blocks of 16
        # (32-byte rows, 32-byte swizzle), one bulk store each
        if BN % 64 == 0:
            c_s = tp.shared((BM, BN), tp.bf16, swizzle=tp.Swizzle(3, 3, 3), layout=b_layout(BM, BN, 64))
        else:
            c_s = tp.shared((BM, BN), tp.bf16, swizzle=tp.Swizzle(1, 3, 3), layout=b_layout(BM, BN, 16))
        staged = tp.mbarrier(1)
    if EPILOGUE == 1:
        # (G35) the tile staged in shared memory and stored by the producer warpgroup in 16-byte chunks of
        # consecutive columns where aligned, else element by element, coalesced along C's rows (gemm_hopper's
        # EPILOGUE=1): C's rows off 16 bytes (N % 8), which no tensor map describes, without the accumulator's
        # column pairs 8 rows apart (`_staged_swizzle`: a row's 16-byte units XORed with offset bits that differ over
        # 8 rows)
        if BN & (BN - 1) == 0 or BN % 128 == 64:
            c_s = tp.shared((BM, BN), tp.bf16, swizzle=_staged_swizzle(BN))
        else:
            # (other widths, 176: 11 x 12 tiles of 192 x 176 fill 132 SMs at 2051 x 2045) rows padded to a pitch of an
            # odd number of 16-byte units: the 8 rows of an accumulator store in distinct banks
            c_s = tp.shared((BM, BN), tp.bf16, layout=tp.Layout((BM, BN), (_staged_pitch(BN), 1)))
        if STORE_ALL == 0:
            staged = tp.mbarrier(1)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda j, k: ("B", k, j))
    k_tiles = tp.cdiv(A.shape[1], BK)
    if tp.warpgroup_id() == 0:          # producer warpgroup: one thread issues the bulk tensor copies
        if PRODUCER_REGS > 0:
            tp.setmaxnreg(PRODUCER_REGS)   # (its registers go to the consumers)
        for k in range(k_tiles):
            if IN_FLIGHT == 0:
                if k >= STAGES:
                    tp.mbarrier_wait(empty[k % STAGES], k // STAGES - 1)   # tile k - STAGES was released
            else:
                tp.mbarrier_wait(empty[k % STAGES], k // STAGES)       # (the consumers pre-release every stage)
            k0 = k * BK
            # (TMA_ONLY: no per-element copy compiled in beside the bulk copies, whose registers ptxas would size the
            # whole block for: operands whose tensor maps can be made, as `launch` checks)
            tp.copy_bulk(A[m0:m0 + BM, k0:k0 + BK], a_s[k % STAGES], full[k % STAGES], fallback=TMA_ONLY == 0)
            tp.copy_bulk(B[n0:n0 + BN, k0:k0 + BK], b_s[k % STAGES], full[k % STAGES], fallback=TMA_ONLY == 0)
            tp.mbarrier_arrive(full[k % STAGES])
        if EPILOGUE == 2:
            tp.mbarrier_wait(staged, 0)                # the consumers' scaled tile is in c_s
            tp.store_bulk(c_s, C[m0:m0 + BM, n0:n0 + BN])  # TMA store (rows / columns past M / N not written)
            tp.store_bulk_wait(c_s)                    # c_s is read before the block exits
        if EPILOGUE == 1 and STORE_ALL == 0:
            tp.mbarrier_wait(staged, 0)
            tp.copy(c_s, C[m0:m0 + BM, n0:n0 + BN])    # shared -> global, coalesced (the ragged edge masked)
    else:                               # consumer warpgroups: wgmma over their own threads, 64 rows each
        if CONSUMER_REGS > 0:
            tp.setmaxnreg(CONSUMER_REGS)
        scale = (tp.load(SA[0:1]) * tp.load(SB[0:1]))[:, None]   # (1, 1): broadcasts over the tile
        acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1)))
        if IN_FLIGHT == 0:
            for k in range(k_tiles):
                tp.mbarrier_wait(full[k % STAGES], k // STAGES)        # stage k % STAGES holds tile k
                acc = tp.mma(a_s[k % STAGES], b_s[k % STAGES].T, acc)
                tp.mbarrier_arrive(empty[k % STAGES])
        else:
            # one wgmma group in flight: tile k's group is issued, wait_group 1 retires tile k - 1's, then tile
            # k - 1's stage is released (every stage but the last is released once up front)
            for s in tp.static_range(STAGES - 1):
                tp.mbarrier_arrive(empty[s])
            for k in range(k_tiles):
                tp.mbarrier_wait(full[k % STAGES], k // STAGES)
                acc = tp.mma_async(a_s[k % STAGES], b_s[k % STAGES].T, acc)
                tp.mma_wait(1)
                tp.mbarrier_arrive(empty[(k + STAGES - 1) % STAGES])   # tile k - 1's stage
            tp.mma_wait(0)
        tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
        if EPILOGUE > 0:
            tp.store(c_s, acc * scale)                 # rounded to bf16 into the staged tile
            if EPILOGUE == 2 or STORE_ALL == 0:
                tp.mbarrier_arrive(staged)             # the producer warpgroup stores it
        else:
            tp.store(C[m0:m0 + BM, n0:n0 + BN], acc * scale)
    if EPILOGUE == 1 and STORE_ALL == 1:
        # every warpgroup stores the staged tile (4x the threads of the producer's store: C's rows off 16 bytes are
        # realigned row by row, tilepy_hip/render/copies.py)
        tp.barrier()
        tp.copy(c_s, C[m0:m0 + BM, n0:n0 + BN])


@tp.kernel(threads=_threads, target="sm_90a")
def gemm_fp8_persistent(A: tp.Tensor[tp.e4m3, "M", "K"], B: tp.Tensor[tp.e4m3, "N", "K"],
                        SA: tp.Tensor[tp.f32, "SA"], SB: tp.Tensor[tp.f32, "SB"], C: tp.Tensor[tp.bf16, "M", "N"],
                        BM: tp.constexpr = 128, BN: tp.constexpr = 256, BK: tp.constexpr = 128,
                        STAGES: tp.constexpr = 4, CONSUMERS: tp.constexpr = 2,
                        INSTR: tp.constexpr = tp.nv.wgmma_m64n256k32_e4m3, SWIZZLE: tp.constexpr = tp.Swizzle(3, 4, 3),
                        GROUP_M: tp.constexpr = 8, PRODUCER_REGS: tp.constexpr = 0,
                        CONSUMER_REGS: tp.constexpr = 0):
    """gemm_fp8 on a persistent grid (at most one block per SM): block b takes output tiles b, b + grid, ... in
    the grouped order, and the ring runs on across them, so the producer loads the next tile's stages while the
    consumers scale and store this one's accumulator. Each role runs one flat loop over the block's slots
    g = 0 .. my_tiles * k_tiles - 1 (the form of gemm_hopper.gemm_persistent): slot g is k-tile g % k_tiles of
    the block's (g // k_tiles)-th tile, in stage g % STAGES and phase g // STAGES of both mbarriers, affine in
    one loop index, which the verifier proves. The consumers release every stage once up front.

    Not in the policy table: with the bf16 store inside the slot loop ptxas spills (~0.8 KB at 128x256, as
    gemm_hopper's bf16-out persistent kernel does; setmaxnreg 40/232 spills more), and the earlier form with
    nested tile / k loops, which did not spill, measured no faster than gemm_fp8 on the H100 (0.85-0.91x of
    torch._scaled_mm at the large shapes) while the verifier could not prove its ring."""
    a_s = tp.shared((BM, BK), tp.e4m3, stages=STAGES, swizzle=SWIZZLE)
    b_s = tp.shared((BN, BK), tp.e4m3, stages=STAGES, swizzle=SWIZZLE)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda j, k: ("B", k, j))
    n_m = tp.cdiv(C.shape[0], BM)
    n_n = tp.cdiv(C.shape[1], BN)
    in_group = GROUP_M * n_n
    k_tiles = tp.cdiv(A.shape[1], BK)
    first = tp.block_id(0)
    step = tp.num_blocks(0)
    slots = tp.cdiv(n_m * n_n - first, step) * k_tiles     # this block's tiles times k-tiles per tile
    if tp.warpgroup_id() == 0:          # producer warpgroup (its registers go to the consumers: setmaxnreg)
        if PRODUCER_REGS > 0:
            tp.setmaxnreg(PRODUCER_REGS)
        for g in range(slots):
            t = first + (g // k_tiles) * step
            k = g % k_tiles
            first_m = (t // in_group) * GROUP_M
            group_m = tp.minimum(n_m - first_m, GROUP_M)
            m0 = (first_m + (t % in_group) % group_m) * BM
            n0 = ((t % in_group) // group_m) * BN
            tp.mbarrier_wait(empty[g % STAGES], g // STAGES)      # the consumers released the stage
            tp.copy_bulk(A[m0:m0 + BM, k * BK:k * BK + BK], a_s[g % STAGES], full[g % STAGES])
            tp.copy_bulk(B[n0:n0 + BN, k * BK:k * BK + BK], b_s[g % STAGES], full[g % STAGES])
            tp.mbarrier_arrive(full[g % STAGES])
    else:                               # consumer warpgroups
        if CONSUMER_REGS > 0:
            tp.setmaxnreg(CONSUMER_REGS)
        scale = (tp.load(SA[0:1]) * tp.load(SB[0:1]))[:, None]
        for s in tp.static_range(STAGES):
            tp.mbarrier_arrive(empty[s])
        acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1)))
        for g in range(slots):
            tp.mbarrier_wait(full[g % STAGES], g // STAGES)
            if g % k_tiles == 0:        # a tile's first k-tile
                acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1)))
            acc = tp.mma(a_s[g % STAGES], b_s[g % STAGES].T, acc)
            tp.mbarrier_arrive(empty[g % STAGES])
            if g % k_tiles == k_tiles - 1:      # a tile's last k-tile: the epilogue
                t = first + (g // k_tiles) * step
                first_m = (t // in_group) * GROUP_M
                group_m = tp.minimum(n_m - first_m, GROUP_M)
                m0 = (first_m + (t % in_group) % group_m) * BM
                n0 = ((t % in_group) // group_m) * BN
                tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
                tp.store(C[m0:m0 + BM, n0:n0 + BN], acc * scale)


@tp.kernel(threads=_threads, target="sm_90a")
def gemm_fp8_persistent_tma(A: tp.Tensor[tp.e4m3, "M", "K"], B: tp.Tensor[tp.e4m3, "N", "K"],
                            SA: tp.Tensor[tp.f32, "SA"], SB: tp.Tensor[tp.f32, "SB"], C: tp.Tensor[tp.bf16, "M", "N"],
                            BM: tp.constexpr = 128, BN: tp.constexpr = 256, BK: tp.constexpr = 128,
                            STAGES: tp.constexpr = 4, CONSUMERS: tp.constexpr = 2,
                            INSTR: tp.constexpr = tp.nv.wgmma_m64n256k32_e4m3,
                            SWIZZLE: tp.constexpr = tp.Swizzle(3, 4, 3), GROUP_M: tp.constexpr = 8,
                            PRODUCER_REGS: tp.constexpr = 0, CONSUMER_REGS: tp.constexpr = 0,
                            STORE_N: tp.constexpr = 64):
    """gemm_fp8 on a persistent grid with the TMA store in column pieces overlapped with the next tile: the form of
    gemm_hopper.gemm_persistent(EPILOGUE=2, STORE_N) for e4m3 operands (B K-major, as gemm_fp8) and the scaled
    bf16 output. Block b walks output tiles b, b + grid, ... in the grouped order; each tile takes `rounds` whole
    turns of the ring (k-tile k of the block's it-th tile in stage k % STAGES, phase it * rounds + k // STAGES;
    slots past the last k-tile carry only their arrivals). The producer warpgroup's first three warps issue the
    copies (TMA only), its last warp is the store warp: the consumers write the scaled tile's piece p (acc[:, p *
    STORE_N:...] * scale, rounded to bf16) into buffer p % 2 and arrive on staged[p % 2]; the store warp stores it
    (TMA only), waits for the read and hands the buffer back through c_free[p % 2]. The j-th use of a buffer in a
    block is phase j of both (j = it * BN // (2 * STORE_N) + p // 2). 4 stages of 48 KB beside two 16 KB buffers.
    C's rows must be 16-byte multiples (N % 8 == 0) and the operands' bases 16-byte aligned (tensor maps)."""
    a_s = tp.shared((BM, BK), tp.e4m3, stages=STAGES, swizzle=SWIZZLE)
    b_s = tp.shared((BN, BK), tp.e4m3, stages=STAGES, swizzle=SWIZZLE)
    c_s = tp.shared((BM, STORE_N), tp.bf16, stages=2, swizzle=tp.Swizzle(3, 3, 3), layout=b_layout(BM, STORE_N, 64))
    staged = tp.mbarrier(1, stages=2)     # buffer b holds the piece of its j-th use (phase j)
    c_free = tp.mbarrier(1, stages=2)     # the store of that piece has read buffer b (phase j)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda j, k: ("B", k, j))
    n_m = tp.cdiv(C.shape[0], BM)
    n_n = tp.cdiv(C.shape[1], BN)
    in_group = GROUP_M * n_n
    k_tiles = tp.cdiv(A.shape[1], BK)
    rounds = tp.cdiv(k_tiles, STAGES)
    first = tp.block_id(0)
    step = tp.num_blocks(0)
    if tp.warpgroup_id() == 0:          # producer warpgroup (its registers go to the consumers: setmaxnreg)
        if PRODUCER_REGS > 0:
            tp.setmaxnreg(PRODUCER_REGS)
        if tp.warp_id() < 3:            # the copies
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
                        tp.copy_bulk(B[n0:n0 + BN, k * BK:k * BK + BK], b_s[k % STAGES], full[k % STAGES],
                                     fallback=False)
                    tp.mbarrier_arrive(full[k % STAGES])
        else:                           # the store warp, the block's tiles piece by piece
            for t in range(first, n_m * n_n, step):
                first_m = (t // in_group) * GROUP_M
                group_m = tp.minimum(n_m - first_m, GROUP_M)
                m0 = (first_m + (t % in_group) % group_m) * BM
                n0 = ((t % in_group) // group_m) * BN
                it = (t - first) // step
                for p in tp.static_range(BN // STORE_N):
                    tp.mbarrier_wait(staged[p % 2], it * (BN // (2 * STORE_N)) + p // 2)
                    tp.store_bulk(c_s[p % 2], C[m0:m0 + BM, n0 + p * STORE_N:n0 + p * STORE_N + STORE_N],
                                  fallback=False)
                    tp.store_bulk_wait(c_s[p % 2])     # read: the consumers may write the buffer again
                    tp.mbarrier_arrive(c_free[p % 2])
    else:                               # consumer warpgroups
        if CONSUMER_REGS > 0:
            tp.setmaxnreg(CONSUMER_REGS)
        scale = (tp.load(SA[0:1]) * tp.load(SB[0:1]))[:, None]
        for s in tp.static_range(STAGES):
            tp.mbarrier_arrive(empty[s])
        for t in range(first, n_m * n_n, step):
            turn = ((t - first) // step) * rounds
            acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1)))
            for k in range(rounds * STAGES):
                tp.mbarrier_wait(full[k % STAGES], turn + k // STAGES)
                if k < k_tiles:
                    acc = tp.mma(a_s[k % STAGES], b_s[k % STAGES].T, acc)
                tp.mbarrier_arrive(empty[k % STAGES])
            tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
            it = (t - first) // step
            for p in tp.static_range(BN // STORE_N):
                if p >= 2:                      # this tile's piece p - 2 has been read from the buffer
                    tp.mbarrier_wait(c_free[p % 2], it * (BN // (2 * STORE_N)) + p // 2 - 1)
                elif it > 0:                    # the previous tile's last piece in this buffer
                    tp.mbarrier_wait(c_free[p % 2], it * (BN // (2 * STORE_N)) - 1)
                tp.store(c_s[p % 2], acc[:, p * STORE_N:p * STORE_N + STORE_N] * scale)
                tp.mbarrier_arrive(staged[p % 2])


CLUSTER_KEYS = ("BM", "BN", "BK", "STAGES", "CONSUMERS", "INSTR", "SWIZZLE", "EPILOGUE", "TMA_ONLY", "CLUSTER_M")


def _cluster_m(c):
    return (c["CLUSTER_M"], 1, 1)


@tp.kernel(threads=_threads, target="sm_90a", cluster=_cluster_m)
def gemm_fp8_cluster(A: tp.Tensor[tp.e4m3, "M", "K"], B: tp.Tensor[tp.e4m3, "N", "K"], SA: tp.Tensor[tp.f32, "SA"],
                     SB: tp.Tensor[tp.f32, "SB"], C: tp.Tensor[tp.bf16, "M", "N"],
                     BM: tp.constexpr = 64, BN: tp.constexpr = 128, BK: tp.constexpr = 128, STAGES: tp.constexpr = 8,
                     CONSUMERS: tp.constexpr = 1, INSTR: tp.constexpr = tp.nv.wgmma_m64n128k32_e4m3,
                     SWIZZLE: tp.constexpr = tp.Swizzle(3, 4, 3), EPILOGUE: tp.constexpr = 2,
                     TMA_ONLY: tp.constexpr = 1, CLUSTER_M: tp.constexpr = 2):
    """gemm_fp8 on (CLUSTER_M, 1, 1) thread-block clusters along M (G28; gemm_hopper.gemm_cluster RELAXED=1's form for
    e4m3): the blocks of a cluster compute vertically adjacent output tiles (block (x, y): rows x * BM, columns y * BN;
    grid x a multiple of CLUSTER_M, a row tile wholly past M loads zeros and stores nothing), so B's tile of every
    k-step is loaded once per cluster by a TMA multicast (issued by rank k % CLUSTER_M) into the same stage of every
    block. `empty[s]` counts CLUSTER_M arrivals: each block's consumers release a stage on every block of the cluster,
    so a producer refills it only when every reader of its multicast is done. The opening cluster barrier is relaxed
    (the mbarriers' initialization is fenced at cluster scope); instead of a closing one the producer's tail waits,
    after its last copy, for every stage it filled to be released by every block (the only remote writes into a
    block), before the epilogue. wait_group 0 (the stage released after its tile's wgmma).

    Not in the policy: on the H100 it LOST to the unclustered forms at every measured shape (G28 call 5, benchmarks/
    NOTES.md: 1024 x 1024 x 4096 15.9 against 11.9 us, 1024^3 7.6 against 6.8, 2048 x 1024 x 4096 on 128 x 128 tiles
    20.8 against 17.2); a wait_group 1 form (each stage released a tile late) lost more and its producer tail was not
    proved by tilepy-verify, so it was taken out."""
    m0 = tp.block_id(0) * BM
    n0 = tp.block_id(1) * BN
    a_s = tp.shared((BM, BK), tp.e4m3, stages=STAGES, swizzle=SWIZZLE)
    b_s = tp.shared((BN, BK), tp.e4m3, stages=STAGES, swizzle=SWIZZLE)
    if EPILOGUE == 2:
        c_s = tp.shared((BM, BN), tp.bf16, swizzle=tp.Swizzle(3, 3, 3), layout=b_layout(BM, BN, 64))
        staged = tp.mbarrier(1)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(CLUSTER_M, stages=STAGES)    # the consumers of every block of the cluster
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda j, k: ("B", k, j))
    k_tiles = tp.cdiv(A.shape[1], BK)
    tp.cluster_sync(relaxed=True)       # every block's mbarriers are initialized before any other block uses them
    if tp.warpgroup_id() == 0:          # producer warpgroup: one thread issues the bulk tensor copies
        for k in range(k_tiles):
            tp.mbarrier_wait(empty[k % STAGES], k // STAGES)    # every block's consumers released the stage
            k0 = k * BK
            tp.copy_bulk(A[m0:m0 + BM, k0:k0 + BK], a_s[k % STAGES], full[k % STAGES], fallback=TMA_ONLY == 0)
            tp.copy_bulk(B[n0:n0 + BN, k0:k0 + BK], b_s[k % STAGES], full[k % STAGES], fallback=TMA_ONLY == 0,
                         multicast=(1 << CLUSTER_M) - 1, by=k % CLUSTER_M)
            tp.mbarrier_arrive(full[k % STAGES])
        # the tail: every block's consumers released every stage this block filled (the last remote arrivals on its
        # mbarriers): wait k_tiles .. k_tiles + STAGES - 1, as the loop would before its next copies
        for k in range(k_tiles + STAGES):
            if k >= k_tiles:
                tp.mbarrier_wait(empty[k % STAGES], k // STAGES)
        if EPILOGUE == 2:
            tp.mbarrier_wait(staged, 0)                # the consumers' scaled tile is in c_s
            tp.store_bulk(c_s, C[m0:m0 + BM, n0:n0 + BN])
            tp.store_bulk_wait(c_s)
    else:                               # consumer warpgroups: wgmma over their own threads, 64 rows each
        scale = (tp.load(SA[0:1]) * tp.load(SB[0:1]))[:, None]
        acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1)))
        for s in tp.static_range(STAGES):              # every stage starts released, in every block of the cluster
            for r in tp.static_range(CLUSTER_M):
                tp.mbarrier_arrive(empty[s], cta=r)
        for k in range(k_tiles):
            tp.mbarrier_wait(full[k % STAGES], k // STAGES)
            acc = tp.mma(a_s[k % STAGES], b_s[k % STAGES].T, acc)
            for r in tp.static_range(CLUSTER_M):                    # released to every block that multicasts
                tp.mbarrier_arrive(empty[k % STAGES], cta=r)
        tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
        if EPILOGUE == 2:
            tp.store(c_s, acc * scale)
            tp.mbarrier_arrive(staged)
        else:
            tp.store(C[m0:m0 + BM, n0:n0 + BN], acc * scale)


def _swap_cluster(c):
    return (c.get("CLUSTER_M", 1), 1, c["CLUSTER_K"])


def _half_layout(layout, BN, BM):
    """HALF_SUM's half of the (BN, BM) accumulator `layout`: its (BN, BM / 2) column window (either half: the same
    layout)."""
    return layout.window((0, 0), (BN, BM // 2))


def _swap_unsigned_role_index(c):
    """Whether a gemm_fp8_swap form writes its role thread index outside loops as the unsigned remainder
    (`@tp.kernel(unsigned_role_index=...)`, G37): the one-consumer forms with no exchange of halves and no rows'
    cluster or slots (the policy's unsplit BM 16, two row tiles of BM 48 / 96, STORE_T's whole 128-row tiles, the
    cluster's split at BM 16). H100, rotated, paired with torch._scaled_mm replay by replay, two calls (NOTES
    H2; off against on, five rounds): 96 x 4096 x 4096 10.31-10.59 -> 10.13-10.41 us a call (x 0.883-0.895 ->
    0.902-0.909), 192 rows 11.86-11.99 -> 11.59-11.75 (0.909-0.913 -> 0.927-0.935), 256 rows 11.88-11.98 -> 11.74-11.86
    (0.976-0.987 -> 0.988-0.996), 16 x 4096 x 14336 23.23-23.43 -> 23.00-23.18 (1.087-1.090 -> 1.096-1.102), 32 x 4096 x
    4096 0.01-0.10 us, 16 rows even; 6-8% fewer SASS instructions, no spills. Not the HALF_SUM forms (64 / 128 rows
    even, 32 x 4096 x 14336 0.45 us SLOWER: its k loop 78 -> 81 instructions) nor the two-consumer ones (128 x 14336 x
    4096 0.18 us slower, the others even); the rows' cluster and the slots were not measured with it."""
    return c["CONSUMERS"] == 1 and c["HALF_SUM"] == 0 and c["CLUSTER_M"] == 1 and c["SPLIT_K"] == 1


@tp.kernel(threads=_threads, target="sm_90a", cluster=_swap_cluster, unsigned_role_index=_swap_unsigned_role_index)
def gemm_fp8_swap(A: tp.Tensor[tp.e4m3, "M", "K"], B: tp.Tensor[tp.e4m3, "N", "K"], SA: tp.Tensor[tp.f32, "SA"],
                  SB: tp.Tensor[tp.f32, "SB"], C: tp.Tensor[tp.bf16, "M", "N"], WS: tp.Tensor[tp.f32, "WR", "WC"],
                  BM: tp.constexpr = 16, BN: tp.constexpr = 128, BK: tp.constexpr = 128, STAGES: tp.constexpr = 10,
                  CONSUMERS: tp.constexpr = 2, INSTR: tp.constexpr = tp.nv.wgmma_m64n16k32_e4m3,
                  SWIZZLE: tp.constexpr = tp.Swizzle(3, 4, 3), SPLIT_K: tp.constexpr = 4,
                  CLUSTER_K: tp.constexpr = 1, K_WAYS: tp.constexpr = 1, CLUSTER_M: tp.constexpr = 1,
                  TMA_ONLY: tp.constexpr = 0, HALF_SUM: tp.constexpr = 0, STORE_T: tp.constexpr = 0,
                  RELAXED: tp.constexpr = 0):
    """Skinny rows (decode: M <= 256) with the operands swapped: C^T = B @ A^T, so A's few rows are the wgmma
    instruction's N (16-256) instead of padding its M (64), and B, the one large operand, streams through a deep
    ring. Both operands stay K-major, as fp8 wgmma reads them: B's (BN, BK) tile is the instruction's A operand as
    it is, A's (BM, BK) tile its B operand through `.T`. The block's tile is BN columns of C (64 per consumer
    warpgroup) by BM rows; the accumulator is the (BN, BM) tile of C^T, scaled and stored transposed (`acc.T`).
    One wgmma group in flight (wait_group 1; tile k - 1's stage released after it).
    SPLIT_K > 1: block z (grid z) sums the z-th share of the k-tiles, scaled, into slot z of WS (SPLIT_K slots of
    cdiv(M, BM) * BM rows, gemm_hopper.gemm_splitk's FIXUP=3 layout); `splitk_sum_bf16` adds the slots and rounds
    once into C. SPLIT_K=1: C's tile is stored from the registers (WS unused).
    CLUSTER_K = 2 or 4 (SPLIT_K=1; G21): the split summed inside the kernel, no slots and no second launch. Grid z =
    CLUSTER_K is one (1, 1, CLUSTER_K) cluster, rank r summing the r-th share of the k-tiles; the ranks all-reduce
    their scaled tiles in log2(CLUSTER_K) butterfly rounds: in round i each rank pushes its running sum into rank
    (r ^ 2^i)'s receive tile recv[i] by st.async (tp.store_remote, completing that rank's recv_full[i]: no cluster
    barrier, no fence), waits on its own recv_full[i] and adds what it received (the same two values on both sides,
    so every rank holds the same sum); rank r then stores its 1/CLUSTER_K of the tile's columns of C (rows of C^T).
    gemm_splitk_swap's PUSH=1 exchange (G19) for e4m3 operands and more than two ranks; only a relaxed cluster
    barrier after the allocations (the receiving mbarriers are initialized before any push).
    K_WAYS=2 (CONSUMERS=2, BN=64; G24): both consumer warpgroups on ONE (BN, BM) tile of C^T, consumer r taking the
    block's k-tiles k with k % 2 == r into an accumulator of its own (cuBLAS's 384-thread decode form: two wgmma chains
    and twice the stage releases in flight per SM). One ring of an even STAGES: tile k in stage k % STAGES as before,
    so consumer r owns the stages s % 2 == r; it pre-releases its stages but the last (s < STAGES - 2) and, after
    tile k's group is issued and wait_group 1 has retired its previous tile's, releases that stage ((k + STAGES - 2) %
    STAGES). Consumer 1 hands its sum to consumer 0 through a shared (BN, BM) f32 tile (red, red_full); consumer 0
    adds it and goes on as the one consumer of K_WAYS=1 does (slots, cluster exchange or the store).
    CLUSTER_M=2 (SPLIT_K=1, CLUSTER_K=1; G24): the two row tiles of a column tile are one (2, 1, 1) cluster (cuBLAS's
    nvjet 64x8 / 64x64 ..._1x2 decode kernels: rows split over the cluster, no K split, no sum): B's tile, the one large
    operand, is loaded once per cluster by a TMA multicast into the same stage of both blocks (issued by rank k % 2),
    each block loading its own rows of A; a stage is refilled only after the consumers of both blocks released it
    (empty[s] counts CLUSTER_M arrivals, made on every block), with a cluster barrier after the mbarriers'
    initialization and before exit (no block leaves while the other may still arrive on its mbarriers). Grid x is a
    multiple of CLUSTER_M (a row tile wholly past M loads zeros and stores nothing). Not in the policy: slower at
    every measured row count, also with TMA_ONLY=1 and B from DRAM (G32, H100, rotated, benchmarks/NOTES.md: kernel
    +1.4 to +2.5 us at 32-192 x 4096 x 4096; at 192 rows the policy's own BM 96 / K_WAYS=2 form made a cluster +1.6).
    TMA_ONLY=1 (G30): the operands' copies without their per-element fallback (as gemm_fp8's TMA_ONLY; `launch` drops
    it where a tensor map cannot describe an operand).
    HALF_SUM=1 (CLUSTER_K=2, BM a multiple of 16; G34): the exchange as a reduce-scatter over C's rows (the tile's
    columns of C^T) instead of the all-reduce: rank r pushes only the half of its scaled tile that its partner stores
    (columns [(1 - r) * BM / 2, ...) of C^T, a register window: no data moves), waits for the partner's push of its own
    half, adds and stores rows [r * BM / 2, (r + 1) * BM / 2) of the row tile, unmasked: half the bytes through
    distributed shared memory, half the receive tile, half the adds, the store's masked half gone.
    STORE_T=1 (SPLIT_K=1; CLUSTER_K=1 or HALF_SUM=1; G34): C's tile leaves through shared memory and one TMA store
    instead of two-byte stores of the transposed accumulator from the registers (each thread's values of C^T are
    single bf16 elements of C's rows): the consumer writes the scaled tile transposed into c_s (bf16, rows of 128
    bytes, 128-byte swizzle), arrives on `staged`, and the producer warpgroup's thread stores it with
    `cp.async.bulk.tensor` (rows past M not written) and waits for its read before exit. Needs C's rows on 16 bytes
    (N % 8 == 0, `launch` drops it otherwise).
    RELAXED=1 (CLUSTER_M=2, K_WAYS=1; G39): the rows' cluster with gemm_splitk_swap RELAXED's coupling: the opening
    cluster barrier relaxed (tp.mbarrier's init is fenced at cluster scope: no release, no MEMBAR.ALL.GPU) and no
    closing one: the producer's tail waits for the releases k_tiles .. k_tiles + STAGES - 2 of both blocks' consumers
    (every remote arrival into its block) before the block may exit. tilepy-verify proves it for one consumer; over
    K_WAYS=2's alternate k-tiles it does not follow the tail (`kernel_of` refuses that)."""
    m0 = tp.block_id(0) * BM
    n0 = tp.block_id(1) * BN
    LC = tp.accumulator(INSTR, (BN, BM), (CONSUMERS // K_WAYS, 1))
    a_s = tp.shared((BM, BK), tp.e4m3, stages=STAGES, swizzle=SWIZZLE)
    b_s = tp.shared((BN, BK), tp.e4m3, stages=STAGES, swizzle=SWIZZLE)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(CLUSTER_M, stages=STAGES)      # (CLUSTER_M: the consumers of every block of the cluster)
    if CLUSTER_K > 1:       # round i's receive tile (written once, by rank r ^ 2^i) and its mbarrier
        # (HALF_SUM: the half of the tile this rank stores, pushed by its partner)
        recv = tp.shared((BN, BM // (1 + HALF_SUM)), tp.f32, stages=CLUSTER_K // 2,
                         layout=_recv_layout(BN, BM // (1 + HALF_SUM)))
        recv_full = tp.mbarrier(1, stages=CLUSTER_K // 2)
    if K_WAYS == 2:         # consumer 1's sum, handed to consumer 0
        red = tp.shared((BN, BM), tp.f32, layout=_recv_layout(BN, BM))
        red_full = tp.mbarrier(1)
    if STORE_T == 1:        # C's (rows, BN) bf16 tile for the TMA store (HALF_SUM: this rank's half of the rows)
        c_s = tp.shared((BM // (1 + HALF_SUM), BN), tp.bf16, swizzle=tp.Swizzle(3, 3, 3),
                        layout=b_layout(BM // (1 + HALF_SUM), BN, 64))
        staged = tp.mbarrier(1)
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda j, k: ("B", k, j))
    if SPLIT_K > 1:
        z = tp.block_id(2)
        k_tiles = tp.cdiv(tp.cdiv(A.shape[1], BK), SPLIT_K)   # every share the same count (zeros past K)
        k_first = z * k_tiles
    elif CLUSTER_K > 1:
        k_tiles = tp.cdiv(tp.cdiv(A.shape[1], BK), CLUSTER_K)   # rank r's share (zeros past K)
        k_first = tp.block_id(2) * k_tiles
    else:
        k_tiles = tp.cdiv(A.shape[1], BK)
        k_first = 0
    if CLUSTER_M > 1:
        # every block's mbarriers initialized before the other's multicasts and arrivals (RELAXED: an execution
        # barrier, tp.mbarrier's init being fenced at cluster scope: no release, no MEMBAR.ALL.GPU)
        tp.cluster_sync(relaxed=RELAXED == 1)
    elif CLUSTER_K > 1:
        # every rank's recv_full is initialized before another rank pushes into it (the mbarrier's init is fenced at
        # cluster scope: an execution barrier publishes it)
        tp.cluster_sync(relaxed=True)
    if tp.warpgroup_id() == 0:          # producer warpgroup: one thread issues the bulk tensor copies
        for k in range(k_tiles):
            tp.mbarrier_wait(empty[k % STAGES], k // STAGES)       # (the consumers pre-release the stages)
            k0 = (k_first + k) * BK
            tp.copy_bulk(A[m0:m0 + BM, k0:k0 + BK], a_s[k % STAGES], full[k % STAGES], fallback=TMA_ONLY == 0)
            # (CLUSTER_M: into the same stage of every block of the cluster, the ranks taking turns)
            tp.copy_bulk(B[n0:n0 + BN, k0:k0 + BK], b_s[k % STAGES], full[k % STAGES],
                         multicast=(1 << CLUSTER_M) - 1 if CLUSTER_M > 1 else 0,
                         by=k % CLUSTER_M if CLUSTER_M > 1 else None, fallback=TMA_ONLY == 0)
            tp.mbarrier_arrive(full[k % STAGES])
        if CLUSTER_M > 1 and RELAXED == 1:
            # (G39) the tail, in place of the closing cluster barrier (gemm_splitk_swap RELAXED's): it waits for every
            # release the consumers of every block make into this block (the only remote writes but the multicasts,
            # which complete on its own `full`, waited for by its consumers). The consumers release STAGES - K_WAYS
            # stages up front and then, per k-tile, the stage K_WAYS tiles back, the last K_WAYS tiles' never: the
            # releases number k_tiles + STAGES - K_WAYS, the loop above waited for the first k_tiles
            for k in range(k_tiles + STAGES - K_WAYS):
                if k >= k_tiles:
                    tp.mbarrier_wait(empty[k % STAGES], k // STAGES)
        if STORE_T == 1:
            tp.mbarrier_wait(staged, 0)                 # the consumer's scaled tile is in c_s
            if HALF_SUM == 1:       # this rank's half of the row tile (rows / columns past M / N not written)
                for h in tp.static_range(2):
                    if tp.block_id(2) == h:
                        tp.store_bulk(c_s, C[m0 + h * (BM // 2):m0 + h * (BM // 2) + BM // 2, n0:n0 + BN],
                                      fallback=False)
            else:
                tp.store_bulk(c_s, C[m0:m0 + BM, n0:n0 + BN], fallback=False)
            tp.store_bulk_wait(c_s)                     # c_s is read before the block exits
    elif tp.warpgroup_id() == 2 if K_WAYS == 2 else False:   # K_WAYS=2's consumer 1: the odd k-tiles, its sum
        acc = tp.zeros((BN, BM), tp.f32, layout=LC)           # handed to consumer 0
        for s in tp.static_range(1, STAGES - 2, 2):           # its stages (s % 2 == 1) but the last start released
            for q in tp.static_range(CLUSTER_M):
                tp.mbarrier_arrive(empty[s], cta=q if CLUSTER_M > 1 else None)
        for k in range(k_tiles):
            if k % 2 == 1:
                tp.mbarrier_wait(full[k % STAGES], k // STAGES)
                acc = tp.mma_async(b_s[k % STAGES], a_s[k % STAGES].T, acc)
                tp.mma_wait(1)
                for q in tp.static_range(CLUSTER_M):   # its previous tile's (k - 2) stage
                    tp.mbarrier_arrive(empty[(k + STAGES - 2) % STAGES], cta=q if CLUSTER_M > 1 else None)
        tp.mma_wait(0)
        tp.assert_tag(tp.mma_operands(acc), lambda b, a: b[1] == a[2])
        tp.store(red, acc)
        tp.mbarrier_arrive(red_full)
    else:                               # consumer warpgroups: 64 columns of C (rows of C^T) each (K_WAYS=2: the even
        scale = (tp.load(SA[0:1]) * tp.load(SB[0:1]))[:, None]       # k-tiles of the one tile)
        acc = tp.zeros((BN, BM), tp.f32, layout=LC)
        if K_WAYS == 2:     # the even k-tiles
            for s in tp.static_range(0, STAGES - 2, 2):
                for q in tp.static_range(CLUSTER_M):
                    tp.mbarrier_arrive(empty[s], cta=q if CLUSTER_M > 1 else None)
            for k in range(k_tiles):
                if k % 2 == 0:
                    tp.mbarrier_wait(full[k % STAGES], k // STAGES)
                    acc = tp.mma_async(b_s[k % STAGES], a_s[k % STAGES].T, acc)
                    tp.mma_wait(1)
                    for q in tp.static_range(CLUSTER_M):   # tile k - 2's stage
                        tp.mbarrier_arrive(empty[(k + STAGES - 2) % STAGES], cta=q if CLUSTER_M > 1 else None)
            tp.mma_wait(0)
            tp.assert_tag(tp.mma_operands(acc), lambda b, a: b[1] == a[2])
            tp.mbarrier_wait(red_full, 0)
            acc = acc + tp.load(red, layout=LC)
        else:
            for s in tp.static_range(STAGES - 1):
                for q in tp.static_range(CLUSTER_M):
                    tp.mbarrier_arrive(empty[s], cta=q if CLUSTER_M > 1 else None)
            for k in range(k_tiles):
                tp.mbarrier_wait(full[k % STAGES], k // STAGES)
                acc = tp.mma_async(b_s[k % STAGES], a_s[k % STAGES].T, acc)
                tp.mma_wait(1)
                for q in tp.static_range(CLUSTER_M):   # tile k - 1's stage
                    tp.mbarrier_arrive(empty[(k + STAGES - 1) % STAGES], cta=q if CLUSTER_M > 1 else None)
            tp.mma_wait(0)
            tp.assert_tag(tp.mma_operands(acc), lambda b, a: b[1] == a[2])   # B's k is A's k
        if SPLIT_K > 1:
            mine = (z * tp.num_blocks(0) + tp.block_id(0)) * BM      # split z's slot
            tp.store(WS[mine:mine + BM, n0:n0 + BN], (acc * scale).T)
        elif HALF_SUM == 1:     # (CLUSTER_K=2) reduce-scatter: push the partner's half, add the own half
            total = acc * scale
            r = tp.cluster_rank()
            lo, hi = total[:, 0:BM // 2], total[:, BM // 2:BM]     # register windows (the same layout)
            tp.store_remote(recv[0], tp.where(r == 0, hi, lo), recv_full[0], r ^ 1)   # rank r ^ 1 stores that half
            tp.mbarrier_wait(recv_full[0], 0)
            mine = tp.where(r == 0, lo, hi) + tp.load(recv[0], layout=_half_layout(LC, BN, BM))
            if STORE_T == 1:
                tp.store(c_s, mine.T)               # this rank's rows, the producer warpgroup stores them
                tp.mbarrier_arrive(staged)
            else:
                for h in tp.static_range(2):
                    if tp.block_id(2) == h:         # rank h's rows: h * BM / 2 .. of the row tile
                        tp.store(C[m0 + h * (BM // 2):m0 + h * (BM // 2) + BM // 2, n0:n0 + BN], mine.T)
        elif CLUSTER_K > 1:
            total = acc * scale
            for i in tp.static_range(CLUSTER_K // 2):        # butterfly rounds: partner r ^ 1, then r ^ 2
                tp.store_remote(recv[i], total, recv_full[i], tp.cluster_rank() ^ (1 << i))
                tp.mbarrier_wait(recv_full[i], 0)
                total = total + tp.load(recv[i], layout=LC)
            mine = tp.arange(BN)[None, :] * CLUSTER_K // BN == tp.block_id(2)    # this rank's columns of C
            tp.store(C[m0:m0 + BM, n0:n0 + BN], total.T, mask=mine)
        elif STORE_T == 1:
            tp.store(c_s, (acc * scale).T)          # rounded to bf16, transposed, into the staged tile
            tp.mbarrier_arrive(staged)              # the producer warpgroup stores it
        else:
            tp.store(C[m0:m0 + BM, n0:n0 + BN], (acc * scale).T)
    if CLUSTER_M > 1 and RELAXED == 0:
        tp.cluster_sync()       # (the other block's last releases arrive on this block's mbarriers)


PRESETS = {
    "sm_90a": dict(BM=128, BN=256, BK=128, STAGES=4, CONSUMERS=2, INSTR=tp.nv.wgmma_m64n256k32_e4m3),
}
NUM_SMS = 132  # H100 SXM

# The policy per shape class (constexprs over PRESETS["sm_90a"]); `policy(M, N, K)` picks one.
POLICIES = {
    # the TMA-store epilogue with 3 stages and register budgets 96 / 200 (setmaxnreg): H100, x torch._scaled_mm in
    # the same run (benchmarks/NOTES.md G10, results/gemm-large-g10-fp8-*.json): 4096^3 0.833-0.838 -> 0.987 (the
    # TMA store alone 0.937-0.940), 4096 x 14336 x 4096 0.795 -> 0.847 (TMA store alone), 8192^3 0.872 -> 0.876 (TMA
    # store alone, even); the register budgets timed at 4096^3 only. Since G12 the large class's shapes with more tiles
    # than SMs and N % 8 == 0 run LARGE_PERSISTENT (below); this row serves the others and a caller's constexprs
    "large": dict(STAGES=3, EPILOGUE=2, PRODUCER_REGS=96, CONSUMER_REGS=200),
    # M <= 256 (decode): 64 x 128 tiles, one consumer warpgroup, a deeper ring: more blocks than 128 x 256. Since G20
    # `policy` runs swap-AB there (swap_params); this row is what a caller's own constexprs lie over
    "skinny": dict(BM=64, BN=128, STAGES=6, CONSUMERS=1, INSTR=tp.nv.wgmma_m64n128k32_e4m3, IN_FLIGHT=1),
    # <= 1024^3: 128 x 128 tiles (more blocks)
    "small": dict(BN=128, STAGES=6, INSTR=tp.nv.wgmma_m64n128k32_e4m3, IN_FLIGHT=1),
}


# The large class with more 128 x 256 tiles than SMs and C rows of 16-byte multiples (N % 8 == 0: the TMA-only store)
# runs gemm_fp8_persistent_tma (G12; H100, x torch._scaled_mm in the same run, benchmarks/results/gemm-large-g12-call2-
# *.json): 96 / 200, GROUP_M 16 against the policy above: 8192^3 0.942 -> 1.004, 4096 x 14336 x 4096 1.005 -> 1.021
# (the policy's 0.906 in call 1), 4096^3 0.948 -> 1.031, 4096 x 4096 x 14336 0.991 -> 1.053; 64 / 216, no budgets
# and GROUP_M 8 within 1-3% of it. The persistent grid overlaps each tile's store with the next tile's ring (the
# epilogue was exposed once per block) and the 16 KB store buffers leave room for a 4th stage.
LARGE_PERSISTENT = dict(PERSISTENT=1, STORE_N=64, STAGES=4, PRODUCER_REGS=96, CONSUMER_REGS=200, GROUP_M=16)

# Small and mid shapes (G28, more than 256 rows; H100, rotated graph time x torch._scaled_mm, three alternated rounds a
# call, two calls, benchmarks/NOTES.md "fp8 small and mid shapes", results/gemm-fp8-small-g28-call{1,3}-*.json): tiles
# that fill the SMs with one wgmma group in flight, deep rings, the TMA store, and the operands' copies TMA only
# (TMA_ONLY: 58-90 registers a thread where the per-element fallback compiled in beside them took 250-255; `launch`
# drops it for operands a tensor map cannot describe). Chosen by how many tiles each size gives (`small_form`):
# * 64 x 128 tiles in at most half a wave: 64 x 64 tiles, two blocks an SM (4 stages where K has at most 4 k-tiles,
#   else 6): 512^3 0.55-0.57 -> 0.88-0.92, 640^3 0.60 -> 0.97;
# * 64 x 128 tiles in at most one wave: those, 8 stages (one block an SM): 768^3 0.60-0.61 -> 0.89, 1024^3 0.62-0.64
#   -> 0.91-0.92, 1000 x 1000 x 1024 0.87 (against _scaled_mm on operands padded to 16s), 1024 x 1024 x 4096 0.44-0.45
#   -> 0.975-0.98, 512 x 2048 x 4096 0.47 -> 1.00, 2048 x 512 x 2048 0.52 -> 0.96;
# * else 128 x 128 tiles (two consumers) in at most one wave where 128 x 256 tiles fill at most 3/4 of one: those, 5
#   stages: 2048 x 1024 x 4096 0.60 -> 0.88-0.89, 1024 x 2048 x 2048 0.64 -> 0.87;
# * C's rows off 16 bytes (N % 8: the TMA store's per-element fallback) store from the registers (EPILOGUE=0); the large
#   class's 128 x 256 tiles there (no persistent form: its store is TMA only) run 128 x 128 tiles, 6 stages, the
#   registers' store: 2051 x 2045 x 1008 69.9 -> 32.6 us (measured at that shape only; _scaled_mm cannot take it, on
#   operands padded to 16s 15.0; since G35 UNALIGNED_N_192x192 first, below; since the realigned store every form
#   there stages C, LARGE_STAGED below).
# Where 128 x 256 tiles fill more (2048^3 0.93-0.94, 4096 x 1024 x 1024 0.86, 1536^3 0.76) the large row stays: every
# form here measured slower there (64 x 128 s4 0.73-0.77, 128 x 128 0.64-0.81, the persistent 128 x 128 form 0.68-0.84;
# the large row with TMA_ONLY the same, 168 registers either way at 384 threads). (G35: 1536^3 runs WAVE_128x144, and
# one wave filled past 3/4 with whole k-tiles LARGE_PERSISTENT, `policy`.)
_I128, _I64 = tp.nv.wgmma_m64n128k32_e4m3, tp.nv.wgmma_m64n64k32_e4m3
SMALL_64x64 = dict(BM=64, BN=64, STAGES=6, CONSUMERS=1, INSTR=_I64, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1,
                   PRODUCER_REGS=0, CONSUMER_REGS=0)
SMALL_64x128 = dict(BM=64, BN=128, STAGES=8, CONSUMERS=1, INSTR=_I128, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1,
                    PRODUCER_REGS=0, CONSUMER_REGS=0)
MID_128x128 = dict(BM=128, BN=128, STAGES=5, CONSUMERS=2, INSTR=_I128, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1,
                   PRODUCER_REGS=0, CONSUMER_REGS=0)
UNALIGNED_N_128x128 = dict(MID_128x128, STAGES=6, EPILOGUE=0)
# (G35; H100, rotated, x torch._scaled_mm, benchmarks/NOTES.md G35, results/gemm-fp8-g35-call{2,3}-*.json) where 128 x
# 128 tiles spill into a second wave and 128 x 144 tiles do not (1536^3: 144 against 12 x 11 = 132, cuBLASLt's
# count), 128 x 144 tiles, 5 stages, the TMA store in 16-column blocks: 1536^3 0.74-0.77 (the large row's 72 tiles)
# -> 0.91 (the registers' store on the same tiles 0.72-0.73)
_I144 = tp.nv.wgmma_m64n144k32_e4m3
# (G35) C's rows off 16 bytes (no tensor map, so no TMA store) where 192 x 192 tiles fill one wave: three consumers,
# 3 stages, the tile staged in shared memory and stored coalesced by the producer warpgroup (EPILOGUE=1): 2051 x 2045 x
# 1008 (11 x 11 = 121 tiles where 128 x 256 gives 136: two waves) 31.8-32.3 -> 28.5-28.8 us (0.45-0.46 -> 0.51-0.52x
# _scaled_mm on operands padded to 16s, calls 2-3). What is left there is C's store: on the aligned 2048 x 2048 x 1008
# the registers' store costs 5-6 us over the TMA store at 128 x 256, the staged store more (benchmarks/NOTES.md G35)
#
# C's rows off 16 bytes (realign session, benchmarks/NOTES.md "Rows off 16 bytes"): the staged tile's store realigned
# row by row in the render (16-byte stores of each row's aligned body) and taken by every warpgroup (STORE_ALL=1, 4x
# the producer's threads): 2051 x 2045 x 1008 0.50 -> 0.83x the padded peer. Every form with C's rows off 16 bytes
# stages C so (`small_form`): 192 x 192 or 192 x 176 where its tiles fill the waves better than the large row's by 0.1
# (`_wave_fill`), else the large row's 128 x 256 tiles (LARGE_STAGED: without setmaxnreg, which STORE_ALL's common
# code cannot keep), and the small / mid forms with the same epilogue
UNALIGNED_N_192x192 = dict(BM=192, BN=192, STAGES=3, CONSUMERS=3, INSTR=tp.nv.wgmma_m64n192k32_e4m3, IN_FLIGHT=1,
                           EPILOGUE=1, STORE_ALL=1, TMA_ONLY=1, PRODUCER_REGS=0, CONSUMER_REGS=0)
# 192 x 176 tiles (c_s rows padded to 184, `_staged_pitch`): 2051 x 2045's 11 x 12 = 132 tiles fill the SMs where 192 x
# 192 leaves 11 idle: 2051 x 2045 x 1008 0.82 -> 0.86, x 4096 0.83 -> 0.88-0.89 (call 6, NOTES "Rows off 16 bytes")
UNALIGNED_N_192x176 = dict(UNALIGNED_N_192x192, BN=176, INSTR=tp.nv.wgmma_m64n176k32_e4m3)
LARGE_STAGED = dict(BM=128, BN=256, STAGES=3, CONSUMERS=2, INSTR=tp.nv.wgmma_m64n256k32_e4m3, EPILOGUE=1, STORE_ALL=1,
                    PRODUCER_REGS=0, CONSUMER_REGS=0)
WAVE_128x144 = dict(BM=128, BN=144, STAGES=5, CONSUMERS=2, INSTR=_I144, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1,
                    PRODUCER_REGS=0, CONSUMER_REGS=0)


def small_form(M: int, N: int, K: int) -> dict | None:
    """The small / mid form (G28, above) for more than 256 rows outside the large class's persistent grid, or None
    where the class's row stays."""
    t64, t128 = tp.cdiv(M, 64) * tp.cdiv(N, 128), tp.cdiv(M, 128) * tp.cdiv(N, 128)
    t144 = tp.cdiv(M, 128) * tp.cdiv(N, 144)
    t256 = tp.cdiv(M, 128) * tp.cdiv(N, 256)
    if M <= 256 or (N % 8 == 0 and t256 > NUM_SMS):
        return None
    if 2 * t64 <= NUM_SMS:
        form = dict(SMALL_64x64, STAGES=4 if tp.cdiv(K, 128) <= 4 else 6)
    elif t64 <= NUM_SMS:
        form = dict(SMALL_64x128)
    elif t128 <= NUM_SMS and 4 * t256 <= 3 * NUM_SMS:
        form = dict(MID_128x128)
    elif N % 8 == 0 and t144 <= NUM_SMS < t128 and 4 * t256 <= 3 * NUM_SMS:
        return dict(WAVE_128x144)
    elif N % 8 and shape_class(M, N, K) == "large":
        fill192, fill176 = (_wave_fill(tp.cdiv(M, 192) * tp.cdiv(N, bn)) for bn in (192, 176))
        form, fill = (UNALIGNED_N_192x176, fill176) if fill176 > fill192 else (UNALIGNED_N_192x192, fill192)
        return dict(form if fill >= _wave_fill(t256) + 0.1 else LARGE_STAGED)
    else:
        return None
    if N % 8:
        form.update(EPILOGUE=1, STORE_ALL=1)    # (the staged tile, realigned, stored by every warpgroup)
    return form


def _wave_fill(tiles: int) -> float:
    """The share of the SMs' block slots that `tiles` one-block-per-SM tiles keep busy over their waves."""
    return tiles / (tp.cdiv(tiles, NUM_SMS) * NUM_SMS)


# Skinny rows with the operands swapped (gemm_fp8_swap): C^T's tile is BN = 128 columns of C over two consumer
# warpgroups by BM rows (the instruction's N: the rows rounded up to 16, 32, 64 or 128; more rows take 128-row
# tiles; any e4m3 width of SWAP_INSTR by hand, and the policy's exact-BM rows, G24), a ring as deep as 220 KB of
# shared memory holds (at most 12 stages), and split-K so the tiles x shares fill at most one wave of SMs with >=
# SWAP_MIN_SHARE k-tiles a share (slots summed by splitk_sum_bf16, or, with `cluster`, summed in the kernel over a
# cluster: CLUSTER_K; the policy, swap_policy, takes CLUSTER_K=2, G21).
SWAP_INSTR = {n: getattr(tp.nv, f"wgmma_m64n{n}k32_e4m3")
              for n in (8, 16, 24, 32, 48, 64, 80, 96, 104, 112, 128, 144, 192, 256)}
SWAP_MIN_SHARE = 4
SWAP_MAX_SPLIT = 8     # splitk_sum unrolls one load per slot
SWAP_SMEM = 220 * 1024


def swap_params(M: int, N: int, K: int, BN: int = 128, BM: int | None = None, sms: int | None = None,
                cluster: int = 0, k_ways: int = 1, cluster_m: int = 1) -> dict:
    """gemm_fp8_swap's constexprs for an (M, N, K) product (SWAP=1 marks the form for `launch`). With `cluster` (2 or
    4: the most ranks taken), a split of 2 (or 4) runs as CLUSTER_K (summed inside the kernel through distributed
    shared memory) where the receive tiles leave room for SWAP_CLUSTER_MIN_STAGES stages; otherwise the slots.
    k_ways=2: two consumer warpgroups on one 64-column tile (K_WAYS=2; BN 64), an even ring beside the hand-over
    tile. cluster_m=2: the rows split over a (2, 1, 1) cluster sharing B's tiles by multicast (CLUSTER_M=2), BM the
    instruction N that holds half the rows, no K split."""
    if BM is None and cluster_m > 1:
        BM = next(r for r in sorted(SWAP_INSTR) if r >= min(tp.cdiv(M, cluster_m), 128))
    if BM is None:
        BM = next(r for r in (16, 32, 64, 128) if r >= min(M, 128))
    bk = 128
    if k_ways == 2:
        BN = 64
    stages = swap_stages(BM, BN, 1, k_ways)
    tiles = tp.cdiv(M, BM) * tp.cdiv(N, BN)
    kt = tp.cdiv(K, bk)
    split = max(1, min((sms or NUM_SMS) // tiles, kt // SWAP_MIN_SHARE, SWAP_MAX_SPLIT))
    split = tp.cdiv(kt, tp.cdiv(kt, split)) if cluster_m == 1 else 1     # evened out: no empty share
    p = dict(SWAP=1, BM=BM, BN=BN, BK=bk, STAGES=stages, CONSUMERS=k_ways * BN // 64, INSTR=SWAP_INSTR[BM],
             SWIZZLE=tp.Swizzle(3, 4, 3), SPLIT_K=split, CLUSTER_K=1, K_WAYS=k_ways, CLUSTER_M=cluster_m)
    if split in (2, 4) and split <= cluster:
        cstages = swap_stages(BM, BN, split, k_ways)
        if cstages >= SWAP_CLUSTER_MIN_STAGES:
            p.update(SPLIT_K=1, CLUSTER_K=split, STAGES=cstages)
    return p


SWAP_CLUSTER = 2      # the most ranks the skinny policy's in-kernel sum takes (0: the slots)
SWAP_CLUSTER_MIN_STAGES = 4


SWAP_MAX_STAGES = 12


def swap_stages(BM: int, BN: int, cluster_k: int = 1, k_ways: int = 1, half_sum: int = 0, store_t: int = 0) -> int:
    """The ring's depth beside CLUSTER_K's receive tiles (cluster_k // 2 f32 (BN, BM) tiles; HALF_SUM: (BN, BM / 2)),
    K_WAYS=2's hand-over tile (one more (BN, BM)) and STORE_T's bf16 tile of C in SWAP_SMEM, at most SWAP_MAX_STAGES;
    with K_WAYS=2 an even count (each consumer its half)."""
    side = ((cluster_k // 2) * BN * BM * 4 // (1 + half_sum) + (k_ways == 2) * BN * BM * 4
            + store_t * BN * BM * 2 // (1 + half_sum))
    stages = min(SWAP_MAX_STAGES, (SWAP_SMEM - side) // ((BN + BM) * 128))
    return stages - stages % 2 if k_ways == 2 else stages


def swap_cluster_stages(BM: int, BN: int, cluster_k: int) -> int:
    """The ring's depth beside CLUSTER_K's receive tiles (cluster_k // 2 f32 (BN, BM) tiles) in SWAP_SMEM."""
    return swap_stages(BM, BN, cluster_k)


def swap_policy(M: int, N: int, K: int, exact: bool = True, whole: bool = True, unsplit: bool = True,
                tma_only: bool = True, g34: bool = True, h3: bool = True) -> dict:
    """The skinny class's form: swap-AB (swap_params) with a split of 2 summed in the kernel (CLUSTER_K=2) where it
    applies: over 128-column tiles where their split is 2 and the row tiles are whole (M % BM == 0), else over 64-column
    tiles (one consumer) where theirs is. H100, x torch._scaled_mm against the slots, two alternated runs
    (benchmarks/NOTES.md G21): 16-128 x 4096 x 4096 0.59-0.84 -> 0.60-0.86, 256 x 4096 x 4096 0.79-0.80 -> 0.95-0.96,
    16-256 x 4096 x 14336 0.79-0.98 -> 0.90-1.08; 192 x 4096 x 4096 (a half-empty second row tile, 128-column tiles)
    lost 4% and keeps the slots. Clusters of 4 are not taken: at 16-64 x 4096 x 4096 they ran 11.3-15.4 us against
    the slots' 7.8-9.3 (and 64 x 4096 x 14336 38 us against 29).
    More than 16 rows that the table's BM pads, where that form splits K and SWAP_EXACT_K[0] <= K <= SWAP_EXACT_K[1]
    (G24): BM the rows' own instruction N (swap_exact_bm: no rows past M in A's box) with two consumers on one
    64-column tile taking alternate k-tiles (K_WAYS=2), where that runs as the cluster's split of 2 or unsplit, in one
    full wave, with >= 8 stages (exact=False: G21's table without it). H100, x torch._scaled_mm, four alternated runs
    over two calls (benchmarks/NOTES.md G24): 24 x 4096 x 4096 0.77-0.79 -> 0.81-0.82, 48 rows 0.70-0.71 -> 0.75-0.76,
    96 rows 0.67-0.68 -> 0.74-0.76, 192 rows 0.74-0.76 -> 0.90-0.93 (measured at N = K = 4096 only).
    Whole 128-row tiles past 128 rows (256), where the table splits K and SWAP_EXACT_K[0] <= K <= SWAP_EXACT_K[1]
    (G30): 64-column tiles, one consumer, no K split (swap_params(BN=64): its row tiles x column tiles fill one wave,
    9 stages) where that is one full wave (whole=False: without it). H100 with B from DRAM (input sets rotated, two
    runs in turn, benchmarks/NOTES.md G30 call 3): 256 x 4096 x 4096 15.17 / 15.64 -> 14.24 / 14.70 us a call (kernel
    14.1 -> 13.0-13.2), x torch._scaled_mm 0.81-0.83 -> 0.86-0.88. (Unsplit lost at 16-128 rows, where 64 blocks
    each run the whole K, and at K = 14336.)
    At most 16 rows at K = 4096 where 64-column tiles give about half a wave (0.45-0.5 x the SMs: N = 4096 on an H100;
    G30 call 4): those tiles unsplit (64 blocks, 12 stages, one consumer; unsplit=False: without it). With the copies
    TMA only it beats the split: 16 x 4096 x 4096 kernel 8.87-8.96 -> 8.51-8.54 us, 9.93-9.97 -> 9.57-9.58 us a call
    (without TMA_ONLY the unsplit form was 1.0 us SLOWER than the split, call 3).
    Every row with TMA_ONLY=1 (tma_only=False: without; `launch` drops it where a base is not 16-byte aligned): the
    per-element fallback compiled in beside the copies sized the block's registers (135-245 a thread; 34-154 without
    it). H100, B from DRAM, two runs in turn (G30 call 4), kernel us: 16-128 x 4096 x 4096 -0.13 to -0.24, 192 rows
    12.2 -> 11.6, 256 rows 13.2-13.3 -> 11.8-11.9 (x torch._scaled_mm 0.85-0.86 -> 0.93-0.94 by the call), K = 14336
    at 16 / 64 / 128 rows -0.1 / -0.1 / -0.4 (at 16 x 4096 x 14336 the call's time went +0.2-0.5 us against the kernel's
    -0.15: within the graph times' spread, which is 0.3-0.8 us at 16 rows). The whole G30 policy against the table
    before it, three runs (call 5): faster at every shape measured, x torch._scaled_mm 1 row 1.03-1.10, 16 rows
    0.96-0.97, 32 0.89-0.90, 64 0.90-0.94, 96 / 128 0.84-0.85, 192 0.90-0.91, 256 0.94-0.98, 16 x 4096 x 14336
    1.09-1.11, 128 x 4096 x 14336 0.95-0.96.
    G34's rows over that table (`_swap_g34`; g34=False: without them): two unsplit row tiles at SWAP_ROWS2's rows,
    HALF_SUM on the cluster's split over 64-column tiles, STORE_T on whole 128-row tiles unsplit (H100, B from DRAM,
    x torch._scaled_mm, benchmarks/NOTES.md G34 call 1, three runs in turn: 32 rows 0.87-0.94 -> 0.93-0.96, 64 rows
    0.91-0.92 -> 0.95-0.96, 96 rows 0.81-0.88 -> 0.86-0.91, 128 rows 0.86-0.87 -> 0.92-0.93, 256 rows 0.93 ->
    0.96-0.97, 128 x 4096 x 14336 0.95 -> 0.99).
    H3's rows over those (`_swap_h3`; h3=False: without them): 129-192 rows where N's 128-column tiles fill 3/4 to one
    wave (N = 14336) at SWAP_LONG_N_K, one row tile of BM 192 (BM 144 at 129-144 rows, H4); 129-256 rows where N's
    64-column tiles fill about half a wave (N = 4096) at SWAP_LONG_K, two unsplit row tiles with STORE_T (BM 80 / 112 /
    128) or one row tile of BM 192 over the cluster's split as HALF_SUM (161-192 rows). (`policy` runs the large
    class's persistent 128 x 256 form at 193-256 rows x a long N: `skinny_persistent`.)"""
    p = _swap_table(M, N, K, exact, whole)
    if (unsplit and M <= 16 and SWAP_EXACT_K[0] <= K <= SWAP_EXACT_K[1] and max(p["SPLIT_K"], p["CLUSTER_K"]) > 1
            and 0.45 * NUM_SMS <= tp.cdiv(N, 64) <= NUM_SMS // 2):
        p = swap_params(M, N, K, BN=64)
        p.update(SPLIT_K=1, CLUSTER_K=1)
    if g34:
        p = _swap_g34(M, N, K, p)
    if h3:
        p = _swap_h3(M, N, K, p)
    return {**p, "TMA_ONLY": 1} if tma_only else p


# G34 (H100, B from DRAM, rotated, each form alternated with the table in one call; benchmarks/NOTES.md G34 calls 1-2):
# the rows where two row tiles of half the rows, unsplit, one consumer over 64-column tiles (128 blocks, no cluster: B's
# second read from the L2) beat the table (the K split over a cluster, two consumers on alternate k-tiles, the slots):
# 24-48, 96, 136-224 rows; even at 80 / 160, behind HALF_SUM at 64 / 112 / 128 (SWAP_EXACT_K's K only, where 2 x N / 64
# blocks fill 0.9-1 wave)
SWAP_ROWS2 = ((17, 48), (81, 96), (129, 255))
# ... with C's tile stored by one TMA store (STORE_T) where that won in call 4 (three runs in turn): BM 80 (136 / 160
# rows -0.25 / -0.3 us a call), 112 (224 rows -0.2), 128 (240 rows -0.5); even at BM 96, slower at BM 104 (+0.75) and
# at BM <= 48 (+0.1)
SWAP_ROWS2_STORE_T = (80, 112, 128)


def _swap_g34(M: int, N: int, K: int, p: dict) -> dict:
    """G34's rows over the table: two unsplit row tiles at SWAP_ROWS2's rows; HALF_SUM=1 (the cluster's split summed as
    a reduce-scatter of C's rows) on the other CLUSTER_K=2 rows of 64-column tiles with whole 8-row halves and BM >= 32
    (at BM 16, 16 x 4096 x 14336, it was within the spread); STORE_T=1 (C's tile by one TMA store) on the row tiles of
    SWAP_ROWS2_STORE_T's BM and on the whole 128-row tiles unsplit (G30's 256 rows); each with its ring re-sized."""
    if (any(lo <= M <= hi for lo, hi in SWAP_ROWS2) and SWAP_EXACT_K[0] <= K <= SWAP_EXACT_K[1]
            and 0.9 * NUM_SMS <= 2 * tp.cdiv(N, 64) <= NUM_SMS):
        bm = next(n for n in sorted(SWAP_INSTR) if n >= tp.cdiv(M, 2))
        q = swap_params(M, N, K, BN=64, BM=bm)
        q.update(SPLIT_K=1, CLUSTER_K=1)
        if bm in SWAP_ROWS2_STORE_T and N % 8 == 0:
            q.update(STORE_T=1, STAGES=swap_stages(bm, 64, 1, 1, 0, 1))
        return q
    if p["CLUSTER_K"] == 2 and p["BN"] == 64 and p["BM"] % 16 == 0 and p["BM"] >= 32:
        return {**p, "HALF_SUM": 1, "STAGES": swap_stages(p["BM"], 64, 2, p["K_WAYS"], 1)}
    if (p["CLUSTER_K"] == 1 and p["SPLIT_K"] == 1 and p["BM"] == 128 and p["BN"] == 64 and p["K_WAYS"] == 1
            and M % 128 == 0 and N % 8 == 0):
        return {**p, "STORE_T": 1, "STAGES": swap_stages(128, 64, 1, 1, 0, 1)}
    return p


def _swap_table(M: int, N: int, K: int, exact: bool, whole: bool) -> dict:
    """swap_policy's table before G30's unsplit 16 rows and TMA_ONLY (G21's split in the cluster, G24's exact-BM rows,
    G30's whole 128-row tiles)."""
    p = swap_params(M, N, K, cluster=SWAP_CLUSTER)
    if p["CLUSTER_K"] > 1 and M % p["BM"]:
        p = swap_params(M, N, K)
    elif p["SPLIT_K"] > 2 and SWAP_CLUSTER:
        q = swap_params(M, N, K, BN=64, cluster=SWAP_CLUSTER)
        if q["CLUSTER_K"] > 1:
            p = q
    bm = swap_exact_bm(M)
    if (exact and M > 16 and bm and bm < p["BM"] and SWAP_EXACT_K[0] <= K <= SWAP_EXACT_K[1]
            and max(p["SPLIT_K"], p["CLUSTER_K"]) > 1):
        q = swap_params(M, N, K, BM=bm, k_ways=2, cluster=SWAP_CLUSTER)
        blocks = tp.cdiv(M, bm) * tp.cdiv(N, q["BN"]) * q["CLUSTER_K"]
        if q["SPLIT_K"] == 1 and q["STAGES"] >= 8 and 0.9 * NUM_SMS <= blocks <= NUM_SMS:
            return q
    if (whole and M > 128 and M % 128 == 0 and SWAP_EXACT_K[0] <= K <= SWAP_EXACT_K[1]
            and max(p["SPLIT_K"], p["CLUSTER_K"]) > 1):
        q = swap_params(M, N, K, BN=64)
        if q["SPLIT_K"] == 1 and 0.9 * NUM_SMS <= tp.cdiv(M, q["BM"]) * tp.cdiv(N, 64) <= NUM_SMS:
            return q
    return p


# H3 (H100, B from DRAM, rotated, each form and the peer in one interleaved set of graphs, paired with
# torch._scaled_mm replay by replay; benchmarks/NOTES.md H3 call 1, four blocks of 40 rounds, x peer):
# * 129-256 rows x 14336 x 4096: the table's two 128-row tiles unsplit are 2 x 112 = 224 blocks (1.7 waves; 128 rows'
#   one tile 27.3 us, 160 rows 44.1, 192 rows 41.5). All the rows in ONE tile (BM 192, the e4m3 instruction N; 128
#   columns over two consumers, 5 stages; 112 blocks, B read once): 160 rows 0.624-0.630 -> 0.944-0.947, 192 rows
#   0.715-0.719 -> 0.992-0.995 (29.9 us). BM 256 (4 stages) less: 224 rows 0.94, 256 rows 0.88; there the large
#   class's persistent 128 x 256 grid (2 x 56 = 112 tiles, `skinny_persistent`) instead: 224 rows 0.813-0.823 ->
#   0.978-0.991, 256 rows 0.797-0.802 -> 0.935-0.937 (it ran 0.921-0.923 at 160 rows and 0.983-0.985 at 192: behind BM
#   192 in every block). The K split over a cluster on 128-row tiles (448 blocks) ran 0.48-0.55.
# * 129-256 rows x 4096 x 14336: the table's slots of 2 over 128 x 128 tiles (160-224 rows) or the cluster's split
#   (256). Two unsplit row tiles of half the rows over 64-column tiles (G34's form, 128 blocks) with C by one TMA
#   store (STORE_T, BM 80 / 112 / 128): 160 rows 0.777-0.779 -> 0.924-0.933, 224 rows 0.865-0.876 -> 0.903-0.920,
#   256 rows 0.894-0.899 -> 0.977-1.005; at 192 rows (BM 96, no STORE_T) 0.79-0.85, spread: there one row tile of BM
#   192 over the cluster's split of 2 summed as HALF_SUM (64 x 2 = 128 blocks, 6 stages): 0.807-0.818 -> 0.996-1.010
#   (at BM 256, 4 stages, 224 / 256 rows 0.88 / 0.95: behind the two row tiles).
# Call 2 (the policy against the table without these rows, 4 blocks): 144 / 160 / 192 / 208 / 224 / 256 x 14336 x 4096
# 0.60-0.80 -> 0.945 / 0.945 / 0.99 / 0.96 / 0.97-0.98 / 0.93; 144 / 160 / 176 / 192 / 224 / 240 / 256 x 4096 x 14336
# 0.71-0.91 -> 0.93 / 0.92-0.93 / 0.98-0.99 / 1.01 / 0.92-0.95 / 1.01-1.03 / 0.99-1.01 (every block won).
# H4 (H3's call 3; benchmarks/NOTES.md H3 "Call 3 (H4)", results/h3-skinny-long-call3-*.json; H100, rotated, paired
# replay by replay, 4 blocks of 40 rounds): at 129-144 rows x a long N one row tile of BM 144 (the e4m3 instruction
# n144, 6 stages, 98 registers) in place of BM 192's: 144 x 14336 x 4096 28.61-29.00 -> 28.05-28.31 us, x peer
# 0.946-0.948 -> 0.967-0.970 (every block; measured at 144 rows: below it the same kernel with rows past M). At 224 /
# 256 rows there one row tile of 256 rows lost to the persistent grid in every block: gemm_fp8 as four consumers (4
# stages, the registers' store) 0.86 / 0.79, swapped with 64-wide k-tiles (8 stages) 0.81 / 0.78, against 1.00 / 0.93.
SWAP_LONG_N_BM144 = 144     # the most rows of the long N that take BM 144's tile (H4)
# Measured at these (N, K) only: the rows' (N, K) windows below (SWAP_LONG_N_K: the K with N's 128-column tiles
# filling 3/4 to one wave; SWAP_LONG_K: the K with 2 x N / 64 blocks filling 0.9-1 wave, G34's N condition).
SWAP_LONG_N_K = (4096, 4096)
SWAP_LONG_K = (14336, 14336)


def _long_n(M: int, N: int, K: int) -> bool:
    return (128 < M <= 256 and SWAP_LONG_N_K[0] <= K <= SWAP_LONG_N_K[1]
            and 0.75 * NUM_SMS <= tp.cdiv(N, 128) <= NUM_SMS)


def skinny_persistent(M: int, N: int, K: int) -> bool:
    """Whether the skinny class runs the large class's persistent 128 x 256 form (LARGE_PERSISTENT; H3, above): 193-256
    rows x a long N (N's 128-column tiles 3/4 to one wave at SWAP_LONG_N_K; C's rows on 16 bytes for its TMA store)."""
    return M > 192 and N % 8 == 0 and _long_n(M, N, K)


def _swap_h3(M: int, N: int, K: int, p: dict) -> dict:
    """H3's rows over the table (above): 129-192 rows x a long N, one row tile of BM 192 (128 columns, two consumers,
    unsplit; BM 144 at 129-144 rows, H4); 129-256 rows x a long K, two unsplit row tiles of BM 80 / 112 / 128 with
    STORE_T, or at 161-192 rows (BM 96) one row tile of BM 192 over the cluster's split as HALF_SUM."""
    if M <= 192 and _long_n(M, N, K):       # (H4: BM 144 where that holds the rows)
        return swap_params(M, N, K, BN=128, BM=144 if M <= SWAP_LONG_N_BM144 else 192)
    if (128 < M <= 256 and SWAP_LONG_K[0] <= K <= SWAP_LONG_K[1] and N % 8 == 0
            and 0.9 * NUM_SMS <= 2 * tp.cdiv(N, 64) <= NUM_SMS):
        bm = next(n for n in sorted(SWAP_INSTR) if n >= tp.cdiv(M, 2))
        if bm in SWAP_ROWS2_STORE_T:
            q = swap_params(M, N, K, BN=64, BM=bm)
            q.update(SPLIT_K=1, CLUSTER_K=1, STORE_T=1, STAGES=swap_stages(bm, 64, 1, 1, 0, 1))
            return q
        if bm == 96:
            q = swap_params(M, N, K, BN=64, BM=192, cluster=2)
            if q["CLUSTER_K"] == 2:
                return {**q, "HALF_SUM": 1, "STAGES": swap_stages(192, 64, 2, 1, 1)}
    return p


# the K range where the exact-BM rows (G24) and the whole 128-row tiles unsplit (G30) were measured (K = 4096; K_WAYS=2
# lost at K = 14336 with BM 128, and unsplit tiles at 16-128 rows; shorter K is not measured)
SWAP_EXACT_K = (4096, 4096)


def swap_exact_bm(M: int) -> int | None:
    """The BM that covers M rows with no rows past M in A's box where the table's doesn't: up to 128 rows, the
    smallest e4m3 instruction N >= M; 129-255 rows, half of them where that is an instruction N (two whole row tiles);
    None otherwise."""
    if M <= 128:
        return next(n for n in sorted(SWAP_INSTR) if n >= M)
    return M // 2 if M < 256 and M % 2 == 0 and M // 2 in SWAP_INSTR else None


SWAP_KEYS = ("BM", "BN", "BK", "STAGES", "CONSUMERS", "INSTR", "SWIZZLE", "SPLIT_K", "CLUSTER_K", "K_WAYS", "CLUSTER_M",
             "TMA_ONLY", "HALF_SUM", "STORE_T", "RELAXED")
SWAP_ZERO_KEYS = ("TMA_ONLY", "HALF_SUM", "STORE_T", "RELAXED")      # (absent: 0)


def shape_class(M: int, N: int, K: int) -> str:
    if M <= 256:
        return "skinny"
    if M * N * K <= 1024 ** 3:
        return "small"
    return "large"


def policy(M: int, N: int, K: int, forms: bool = True) -> dict:
    """The constexprs for an (M, N, K) product: the class's row of POLICIES over the preset; with `forms`, the
    large class's persistent form where it applies (LARGE_PERSISTENT above) and the skinny class's swap-AB form
    (`swap_params`: H100, x torch._scaled_mm, above the unswapped 64 x 128 row at all 15 measured decode shapes,
    benchmarks/NOTES.md G20)."""
    cls = shape_class(M, N, K)
    t256 = tp.cdiv(M, 128) * tp.cdiv(N, 256)
    if forms and cls == "large" and N % 8 == 0 and (t256 > NUM_SMS or (
            4 * t256 > 3 * NUM_SMS and K % 128 == 0 and small_form(M, N, K) is None)):
        # (G35: also on one wave of 128 x 256 tiles filled past 3/4 with whole k-tiles: the pieces' store overlapped
        # with the consumers' next piece, 4 stages; H100, rotated, x torch._scaled_mm, calls 1-3: 4096 x 1024 x 1024
        # 0.85-0.88 -> 0.90 (three calls), 2048^3 0.93-0.95 -> 0.95-0.96, 2560 x 1536 x 2048 0.95 -> 0.96. Slower
        # where measured outside that: 2048 x 2048 x 1008 0.94 -> 0.91, 1600^3 (91 tiles) 0.75 -> 0.73)
        return {**PRESETS["sm_90a"], **LARGE_PERSISTENT}
    if forms and cls == "skinny":       # swap-AB (G20; the row below stays what a caller's constexprs lie over)
        if skinny_persistent(M, N, K):      # (H3: 193-256 rows x a long N, the 128 x 256 persistent grid)
            return {**PRESETS["sm_90a"], **LARGE_PERSISTENT}
        return swap_policy(M, N, K)
    if forms and small_form(M, N, K) is not None:    # the small / mid forms (G28, above)
        return {**PRESETS["sm_90a"], **POLICIES[cls], **small_form(M, N, K)}
    return {**PRESETS["sm_90a"], **POLICIES[cls]}


def grid_of(M: int, N: int, params: dict) -> tuple:
    if params.get("SWAP"):
        cm = params.get("CLUSTER_M", 1)      # (grid x a multiple of the cluster's row tiles)
        return (cm * tp.cdiv(tp.cdiv(M, params["BM"]), cm), tp.cdiv(N, params["BN"]),
                max(params.get("SPLIT_K", 1), params.get("CLUSTER_K", 1)))
    if params.get("CLUSTER_M", 1) > 1:      # gemm_fp8_cluster: grid x a multiple of the cluster's row tiles
        cm = params["CLUSTER_M"]
        return (cm * tp.cdiv(tp.cdiv(M, params["BM"]), cm), tp.cdiv(N, params["BN"]))
    tiles = tp.cdiv(M, params["BM"]) * tp.cdiv(N, params["BN"])
    if params.get("PERSISTENT"):
        return (min(tiles, params.get("NUM_SMS", NUM_SMS)),)
    return (tiles, 1)


def kernel_of(params: dict):
    """(kernel, its constexprs): PERSISTENT=1 (and NUM_SMS, the grid cap) picks gemm_fp8_persistent, which keeps
    the wgmma group synchronous and stores from the registers (IN_FLIGHT and EPILOGUE are gemm_fp8's alone)."""
    if params.get("SWAP"):
        extra = sorted(set(params) - set(SWAP_KEYS) - {"SWAP"})
        if extra:
            raise ValueError(f"gemm_fp8: SWAP=1 (gemm_fp8_swap) takes {', '.join(SWAP_KEYS)}; drop {extra}")
        kw = params.get("K_WAYS", 1)
        if kw not in (1, 2) or (kw == 2 and (params["CONSUMERS"] != 2 or params["STAGES"] % 2
                                             or params["STAGES"] < 4)):
            raise ValueError(f"gemm_fp8: SWAP=1 with K_WAYS={kw}: two consumers on one tile (K_WAYS=2) take "
                             f"CONSUMERS=2 and an even STAGES >= 4 (each consumer's stages, one released a tile "
                             f"late); got CONSUMERS={params['CONSUMERS']}, STAGES={params['STAGES']}; or pass K_WAYS=1")
        if params["BN"] * kw != 64 * params["CONSUMERS"] or params["INSTR"].n != params["BM"]:
            raise ValueError(f"gemm_fp8: SWAP=1 computes C^T: BN = 64 * CONSUMERS / K_WAYS columns of C and BM rows, "
                             f"the instruction's N; got BN={params['BN']}, CONSUMERS={params['CONSUMERS']}, K_WAYS="
                             f"{kw}, BM={params['BM']}, INSTR {params['INSTR'].name}")
        ck = params.get("CLUSTER_K", 1)
        if ck not in (1, 2, 4) or (ck > 1 and params["SPLIT_K"] != 1):
            raise ValueError(f"gemm_fp8: SWAP=1 with CLUSTER_K={ck}, SPLIT_K={params['SPLIT_K']}: the in-kernel sum "
                             "runs over a cluster of 2 or 4 blocks (CLUSTER_K 2 or 4) with SPLIT_K=1; or pass "
                             "CLUSTER_K=1 for the slots summed by a second kernel")
        cm = params.get("CLUSTER_M", 1)
        if cm not in (1, 2) or (cm == 2 and (ck != 1 or params["SPLIT_K"] != 1)):
            raise ValueError(f"gemm_fp8: SWAP=1 with CLUSTER_M={cm}: the rows split over a cluster of 2 (CLUSTER_M=2) "
                             f"run without a K split (SPLIT_K=1, CLUSTER_K=1); got SPLIT_K={params['SPLIT_K']}, "
                             f"CLUSTER_K={ck}")
        if params.get("RELAXED", 0) and (cm != 2 or kw != 1):
            raise ValueError(f"gemm_fp8: SWAP=1 with RELAXED=1 relaxes the coupling of the rows' cluster (CLUSTER_M=2, "
                             f"one consumer: K_WAYS=1; a relaxed opening barrier, the producer's tail instead of the "
                             f"closing one, which tilepy-verify does not follow over K_WAYS=2's alternate k-tiles); "
                             f"got CLUSTER_M={cm}, K_WAYS={kw}; or pass RELAXED=0")
        hs, st = params.get("HALF_SUM", 0), params.get("STORE_T", 0)
        if hs and (ck != 2 or params["BM"] % 16):
            raise ValueError(f"gemm_fp8: SWAP=1 with HALF_SUM=1 sums the halves of the tile's rows over a cluster of 2 "
                             f"(CLUSTER_K=2) and a BM of whole 8-row halves (a multiple of 16); got CLUSTER_K={ck}, "
                             f"BM={params['BM']}; or pass HALF_SUM=0")
        if st and (params["SPLIT_K"] != 1 or (ck > 1 and not hs)):
            raise ValueError(f"gemm_fp8: SWAP=1 with STORE_T=1 stores C's tile (or, with HALF_SUM=1, the rank's half "
                             f"of its rows) by one TMA store: SPLIT_K=1 and CLUSTER_K=1 or HALF_SUM=1; got SPLIT_K="
                             f"{params['SPLIT_K']}, CLUSTER_K={ck}, HALF_SUM={hs}; or pass STORE_T=0")
        return gemm_fp8_swap, {k: params.get(k, 0 if k in SWAP_ZERO_KEYS else 1) for k in SWAP_KEYS}
    if params.get("STORE_ALL") and (params.get("EPILOGUE") != 1 or params.get("PRODUCER_REGS")
                                    or params.get("CONSUMER_REGS") or params.get("PERSISTENT")
                                    or params.get("CLUSTER_M", 1) > 1):
        raise ValueError("gemm_fp8: STORE_ALL=1 has every warpgroup store the staged tile (EPILOGUE=1) after the "
                         "roles, code common to both, where setmaxnreg's per-role budgets do not hold (ptxas "
                         "spills there): EPILOGUE=1 with PRODUCER_REGS=0, CONSUMER_REGS=0, no PERSISTENT / "
                         f"CLUSTER_M; got EPILOGUE={params.get('EPILOGUE')}, PRODUCER_REGS="
                         f"{params.get('PRODUCER_REGS')}, CONSUMER_REGS={params.get('CONSUMER_REGS')}")
    if params.get("CLUSTER_M", 1) > 1:      # (G28) the small forms on 2x1 clusters, B multicast
        if (params.get("PERSISTENT") or params.get("PRODUCER_REGS") or params.get("CONSUMER_REGS")
                or params.get("IN_FLIGHT")):
            raise ValueError("gemm_fp8: CLUSTER_M > 1 (gemm_fp8_cluster) runs wait_group 0, no persistent grid and no "
                             "setmaxnreg; drop IN_FLIGHT / PERSISTENT / PRODUCER_REGS / CONSUMER_REGS or CLUSTER_M")
        return gemm_fp8_cluster, {k: v for k, v in params.items() if k in CLUSTER_KEYS}
    if params.get("PERSISTENT"):
        if params.get("IN_FLIGHT"):
            raise ValueError("gemm_fp8: PERSISTENT=1 runs wait_group 0; drop IN_FLIGHT or PERSISTENT")
        if params.get("STORE_N"):      # the TMA store in pieces overlapped with the next tile
            if params.get("EPILOGUE", 2) != 2 or params.get("BN", 256) % (2 * params["STORE_N"]):
                raise ValueError(f"gemm_fp8: STORE_N={params['STORE_N']} (gemm_fp8_persistent_tma) stores the tile in "
                                 f"an even number of column pieces through the TMA (EPILOGUE 2 or absent); got BN="
                                 f"{params.get('BN')}, EPILOGUE={params.get('EPILOGUE')}")
            return gemm_fp8_persistent_tma, {k: v for k, v in params.items()
                                             if k not in ("PERSISTENT", "NUM_SMS", "IN_FLIGHT", "EPILOGUE")}
        if params.get("EPILOGUE"):
            raise ValueError("gemm_fp8: PERSISTENT=1 stores from the registers; drop EPILOGUE or PERSISTENT")
        return gemm_fp8_persistent, {k: v for k, v in params.items()
                                     if k not in ("PERSISTENT", "NUM_SMS", "IN_FLIGHT", "EPILOGUE")}
    return gemm_fp8, {k: v for k, v in params.items() if k not in ("PERSISTENT", "NUM_SMS")}


def _dtype_name(x) -> str:
    return str(getattr(x, "dtype", type(x).__name__)).replace("torch.", "")


def _check(a, b, scale_a, scale_b, out):
    """Shapes and dtypes of a launch; a ValueError that says what to pass otherwise."""
    torch_in = not isinstance(a, np.ndarray)
    want_fp8 = "float8_e4m3fn" if torch_in else "float32"
    for name, x in (("a", a), ("b", b)):
        if _dtype_name(x) != want_fp8:
            raise ValueError(f"gemm_fp8: {name} must be {want_fp8} (e4m3"
                             f"{'' if torch_in else ' values held in float32 on the interpreter'}), got "
                             f"{_dtype_name(x)}; convert with x.to(torch.float8_e4m3fn) after scaling")
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"gemm_fp8: a (M, K) and b (N, K) are 2-D, got {tuple(a.shape)} and {tuple(b.shape)}")
    M, K = a.shape
    N, KB = b.shape
    if KB != K:
        raise ValueError(f"gemm_fp8: b is (N, K) (a weight: out = a @ b.T), its K {KB} differs from a's {K}; a "
                         "(K, N) b goes in as b.t().contiguous()")
    if K % 16:
        raise ValueError(f"gemm_fp8: K = {K} is not a multiple of 16: the copy engine moves rows of a multiple "
                         "of 16 bytes (16 e4m3); pad a and b with zero columns up to a multiple of 16")
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if _dtype_name(s) != "float32" or tuple(s.shape) not in ((1,), ()):
            raise ValueError(f"gemm_fp8: {name} is a float32 tensor of one element (a per-tensor scale, as "
                             f"torch._scaled_mm takes it), got {_dtype_name(s)} {tuple(s.shape)}")
    if tuple(out.shape) != (M, N) or _dtype_name(out) not in ("bfloat16",) + (("float32",) if not torch_in else ()):
        raise ValueError(f"gemm_fp8: out is bf16 ({M}, {N}), got {_dtype_name(out)} {tuple(out.shape)}")
    for name, x in (("a", a), ("b", b), ("out", out)):
        if not (x.flags.c_contiguous if isinstance(x, np.ndarray) else x.is_contiguous()):
            raise ValueError(f"gemm_fp8: {name} must be contiguous (row-major); pass {name}.contiguous()")
    return M, N, K


# A caller who asks for PERSISTENT=1 (gemm_fp8_persistent: wait_group 0, the store from the registers) gets the
# policy less gemm_fp8's own forms where it does not name them itself: no IN_FLIGHT, and no TMA-store epilogue with
# the entries sized for it (3 stages beside c_s, setmaxnreg 96 / 200; the persistent kernel spilled more under
# setmaxnreg): the preset's stages instead. (The large policy's EPILOGUE=2 made PERSISTENT=1 through `launch` a
# ValueError, which failed tests/gpu/test_gemm_fp8.py's two persistent cases on the H100.)
TMA_STORE_SIZED = ("STAGES", "PRODUCER_REGS", "CONSUMER_REGS")


def params_for(M: int, N: int, K: int, **constexprs) -> dict:
    """The constexprs `launch` runs for an (M, N, K) product and a caller's constexprs: the policy under them (a
    caller's own constexprs lie over the policy without its persistent form, which was measured as a whole); for
    PERSISTENT=1, without the policy's IN_FLIGHT and TMA-store epilogue (above)."""
    if constexprs.get("SWAP"):      # the swap form's own table under the caller's constexprs
        # (the in-kernel sum where the table takes it, unless the caller names a split of slots)
        kw, cm = constexprs.get("K_WAYS", 1), constexprs.get("CLUSTER_M", 1)
        sw = swap_params(M, N, K, BN=constexprs.get("BN", 128), BM=constexprs.get("BM"),
                         cluster=0 if "SPLIT_K" in constexprs else SWAP_CLUSTER, k_ways=kw, cluster_m=cm)
        ck = constexprs.get("CLUSTER_K")
        if ck is not None and ck > 1 and sw["CLUSTER_K"] != ck:
            # a cluster the table did not pick: its ring beside the receive tiles
            sw.update(SPLIT_K=1, CLUSTER_K=ck, STAGES=swap_stages(sw["BM"], sw["BN"], ck, kw))
        elif ck == 1 and sw["CLUSTER_K"] > 1:   # the slots asked for: the table's split as slots
            slots = swap_params(M, N, K, BN=sw["BN"], BM=sw["BM"], k_ways=kw)
            sw.update(SPLIT_K=slots["SPLIT_K"], CLUSTER_K=1, STAGES=slots["STAGES"])
        hs, st = constexprs.get("HALF_SUM", 0), constexprs.get("STORE_T", 0)
        if hs or st:        # (G34) the ring beside the half receive tile / C's staged tile
            sw["STAGES"] = swap_stages(sw["BM"], sw["BN"], max(sw["CLUSTER_K"], constexprs.get("CLUSTER_K", 1)), kw,
                                       hs, st)
        return {**sw, **constexprs}
    pol = policy(M, N, K, forms=not constexprs)
    params = {**pol, **constexprs}
    if constexprs.get("PERSISTENT"):
        if "IN_FLIGHT" not in constexprs:
            params.pop("IN_FLIGHT", None)
        if pol.get("EPILOGUE") and "EPILOGUE" not in constexprs:
            params.pop("EPILOGUE")
            for k in TMA_STORE_SIZED:
                if k not in constexprs:
                    params.pop(k, None)
                    if k in PRESETS["sm_90a"]:
                        params[k] = PRESETS["sm_90a"][k]
    return params


def launch(a, b, scale_a, scale_b, out, target: str = "sm_90a", **constexprs):
    """out = (a @ b.T) * scale_a * scale_b in bf16; a: e4m3 (M, K), b: e4m3 (N, K), scales: f32 (1,).
    On the interpreter, float32 numpy arrays holding e4m3 values stand for a and b, and a float32 out for the
    bf16 result (rounded to bf16)."""
    M, N, K = _check(a, b, scale_a, scale_b, out)
    params = params_for(M, N, K, **constexprs)
    if params.get("TMA_ONLY") and "TMA_ONLY" not in constexprs and not _tma_bases(a, b):
        params["TMA_ONLY"] = 0      # the policy's TMA-only copies need tensor maps: 16-byte aligned bases
    if params.get("STORE_T") and not _tma_out(out):
        params["STORE_T"] = 0       # swap-AB's TMA store of C needs a tensor map of C: the registers' store instead
    if (params.get("EPILOGUE") == 2 and not params.get("SWAP") and not params.get("PERSISTENT")
            and "EPILOGUE" not in constexprs and not _tma_out(out)):
        # the TMA store needs a tensor map of C (its fallback: the producer's copy, element by element, of c_s's column
        # blocks, which the render's 16-byte paths do not take): the staged tile stored by every
        # warpgroup instead, without setmaxnreg (STORE_ALL's common code)
        params.update(EPILOGUE=1, STORE_ALL=1, PRODUCER_REGS=0, CONSUMER_REGS=0)
    if tuple(scale_a.shape) == ():
        scale_a = scale_a.reshape(1)
    if tuple(scale_b.shape) == ():
        scale_b = scale_b.reshape(1)
    kernel, kp = kernel_of(params)
    if params.get("SWAP"):
        split = kp["SPLIT_K"]       # (CLUSTER_K > 1: the sum is the kernel's own, no slots)
        ws = _workspace(out, (split * tp.cdiv(M, kp["BM"]) * kp["BM"], N) if split > 1 else (1, 1))
        r = kernel[grid_of(M, N, params)](a, b, scale_a, scale_b, out, ws, target=target, **kp)
        if split > 1:       # the scaled slots' sum, rounded once into out
            splitk_sum_bf16[(tp.cdiv(M, 8), tp.cdiv(N, 128))](ws, out, SPLIT_K=split)
        return r
    return kernel[grid_of(M, N, params)](a, b, scale_a, scale_b, out, target=target, **kp)


def _tma_bases(a, b) -> bool:
    """Whether a's and b's bases are 16-byte aligned (with contiguous rows of a multiple of 16 bytes, which `_check`
    asks for, what a tensor map of either needs); numpy arrays (the interpreter) need none."""
    if isinstance(a, np.ndarray):
        return True
    return a.data_ptr() % 16 == 0 and b.data_ptr() % 16 == 0


def _tma_out(out) -> bool:
    """Whether a tensor map can describe C for a bulk store: rows of a multiple of 16 bytes (N % 8 == 0 in bf16) on a
    16-byte aligned base (numpy arrays, the interpreter: any)."""
    if isinstance(out, np.ndarray):
        return True
    return out.shape[1] % 8 == 0 and out.stride(1) == 1 and out.stride(0) % 8 == 0 and out.data_ptr() % 16 == 0


_WS: dict = {}


def _workspace(like, shape):
    """swap-AB's split-K slots: one f32 buffer per (device, shape), reused by later calls (every call writes each
    slot it reads; calls on two streams at once would share it: launch's callers run one stream)."""
    if isinstance(like, np.ndarray):
        return np.zeros(shape, np.float32)
    import torch

    key = (like.device, shape)
    buf = _WS.get(key)
    if buf is None:
        buf = _WS[key] = torch.empty(shape, dtype=torch.float32, device=like.device)
    return buf


def reference(a, b, scale_a, scale_b):
    """float64 (a @ b.T) * scale_a * scale_b of the e4m3 values."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a @ b.T) * float(np.asarray(scale_a).reshape(-1)[0]) * float(np.asarray(scale_b).reshape(-1)[0])


if __name__ == "__main__":
    from tilepy.dtypes import round_bf16, round_e4m3

    rng = np.random.default_rng(0)
    a = round_e4m3(rng.standard_normal((100, 256)).astype(np.float32) * 4)
    b = round_e4m3(rng.standard_normal((150, 256)).astype(np.float32) * 4)
    sa, sb = np.array([0.5], np.float32), np.array([0.25], np.float32)
    out = np.full((100, 150), np.nan, np.float32)
    launch(a, b, sa, sb, out, BN=128, STAGES=2, INSTR=tp.nv.wgmma_m64n128k32_e4m3)
    ref = reference(a, b, sa, sb)
    print("max rel err =", float(np.abs(out - ref).max() / np.abs(ref).max()), "bf16 ulp =", 2.0**-8,
          "rounded:", bool(np.array_equal(out, round_bf16(out))))
