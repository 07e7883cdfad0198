"""fp32-accurate GEMM on tensor cores (sm_90a): C = A @ B in float32 from three TF32 products per k-tile.

Every f32 input is split into a TF32 head and a TF32 tail, x = hi + lo with hi = round_tf32(x) and
lo = round_tf32(x - hi) (together 21 of float32's 24 significand bits); the product keeps the three terms
that matter, smallest first,

    C += a_lo @ b_hi + a_hi @ b_lo + a_hi @ b_hi        (wgmma m64nBNk8 .tf32)

so its error against float64 matches an SGEMM's while the work runs on the tensor cores (3x the TF32 FLOPs).
The tensor cores' f32 accumulation is not round-to-nearest (its error grows with the chain's length), so
each k-tile's three products go into a fresh accumulator `part` that is added into `acc` with ordinary f32
adds: the long sum over K is rounded as an SGEMM rounds it (PROMOTE=False keeps one accumulator).

Two passes. `split_tf32` (or `split_tf32_t`, which also transposes a (K, N) B into (N, K)) writes hi and lo
of each operand once, K-major, with K padded to a multiple of 4 (zeros), so every row is 16-byte aligned and
the GEMM's tiles always go through the bulk tensor copy engine. `gemm_fp32` is warp-specialized like
`gemm_hopper.py`: warpgroup 0 streams the four tiles of a stage with TMA (`full[s]`), warpgroups
1..CONSUMERS run the three wgmma chains, 64 rows each, and release the stage (`empty[s]`). wgmma reads TF32
K-major only: B lives in shared memory as the (BN, BK) tile and reaches the instruction as its transpose `.T`.

Host API (what a lowering calls; torch tensors on a CUDA device, or numpy arrays on the interpreter):

    launch(a, b, c, b_layout="kn" | "nk", target="sm_90a", **constexprs)

* a: f32 (M, K) or (BATCH, M, K); c: f32 (M, N) or (BATCH, M, N), written (not accumulated into).
* b_layout="kn": b is (K, N) or (BATCH | 1, K, N) -- torch.mm / bmm / matmul(a, b).
  b_layout="nk": b is (N, K) or (BATCH | 1, N, K) -- an nn.Linear weight: c = a @ b.T (F.linear).
  A b with a batch of 1 (or none) serves every batch of a. An unbatched product of at most SWAP_ROWS rows runs
  swap-AB (`launch_swap`): out^T = W @ x.T by gemm_fp32_ct ("nk") or B.T @ x.T by gemm_fp32_kt ("kn", N % 4 ==
  0), the weight read as it is and split in registers, x's few rows split by a pass.
* Any M, N, K >= 1 (edges are masked); contiguous (row-major) tensors. Three launches: the two splits (into
  workspace tensors of (BATCH, M, KP) and (BB, N, KP) f32 x 2, KP = K rounded up to 4) and the GEMM on the
  grid (cdiv(M, BM) * cdiv(N, BN), 1, BATCH), which visits its tiles GROUP_M row tiles at a time. A weight
  used many times may be split once with `split(b, b_layout)` and passed to `launch_split`.
* Split-K (`KSPLIT=S`): too few output tiles to fill the GPU and a long K (256 x 256 x 131072) run S blocks
  per tile, each over a share of the k-tiles, into S partial products (grid z = BATCH * S) that are added
  up afterwards. `launch` picks S with `policy` (one wave of blocks, >= 8 k-tiles a share) unless the caller
  names a tile.
* addmm (beta * bias + alpha * a @ b) is this GEMM followed by an elementwise kernel.
* `PASSES=1`: one TF32 product a_hi @ b_hi per k-tile (what cuBLAS computes for fp32 under TF32; a lowering's
  `--precision tf32`): the tails are neither copied nor multiplied (AL and BL may be any tensors of their
  shapes, e.g. AH and BH again).
"""

import numpy as np

import tilepy as tp


def _threads(c):
    return 128 * (1 + c["CONSUMERS"])


@tp.kernel(threads=128)
def split_tf32(X: tp.Tensor[tp.f32, "R", "C"], HI: tp.Tensor[tp.f32, "R", "CP"], LO: tp.Tensor[tp.f32, "R", "CP"],
               BR: tp.constexpr = 16, BC: tp.constexpr = 128):
    """HI, LO = round_tf32(X), round_tf32(X - HI), columns C..CP of both zero (X reads 0 past its edge)."""
    r0 = tp.block_id(0) * BR
    c0 = tp.block_id(1) * BC
    x = tp.load(X[r0:r0 + BR, c0:c0 + BC])
    hi = tp.round_tf32(x)
    tp.store(HI[r0:r0 + BR, c0:c0 + BC], hi)
    tp.store(LO[r0:r0 + BR, c0:c0 + BC], tp.round_tf32(x - hi))


@tp.kernel(threads=128)
def split_tf32_t(X: tp.Tensor[tp.f32, "Z", "R", "C"], HI: tp.Tensor[tp.f32, "Z", "C", "RP"],
                 LO: tp.Tensor[tp.f32, "Z", "C", "RP"], T: tp.constexpr = 32):
    """The split of X[z].T: a (K, N) operand becomes the K-major (N, KP) hi and lo (the transpose goes through
    shared memory, so both the reads and the writes are whole rows)."""
    z = tp.block_id(2)
    r0 = tp.block_id(0) * T
    c0 = tp.block_id(1) * T
    x = tp.load(X[z, r0:r0 + T, c0:c0 + T])
    hi = tp.round_tf32(x)
    lo = tp.round_tf32(x - hi)
    rows = tp.blocked((T, T), 128, 4)
    tp.store(HI[z, c0:c0 + T, r0:r0 + T], tp.convert_layout(hi.T, rows))
    tp.store(LO[z, c0:c0 + T, r0:r0 + T], tp.convert_layout(lo.T, rows))


# split_tf32_tw's register tile: X's (32, 128) tile over 128 threads, transposed in registers. Thread t holds rows
# 4 (t % 4) + v (v < 4) + 16 r (r < 2) of columns (t // 4) % 8 + 8 (t // 32) + 32 c (c < 4), the rows its fastest
# values: X is read one element a value (a warp: 4 rows x 32 bytes, whole sectors) and X.T written 16 bytes a vector
# (a warp: 8 rows x 64 bytes), with no shared memory and no barrier
TW_LAYOUT = tp.TVLayout((32, 128), (4, 8, 4), (4, 2, 4), (((4, 0, 0), (1, 16, 0)), ((0, 1, 8), (0, 0, 32))))


@tp.kernel(threads=128)
def split_tf32_tw(X: tp.Tensor[tp.f32, "Z", "R", "C"], HI: tp.Tensor[tp.f32, "Z", "C", "RP"],
                  LO: tp.Tensor[tp.f32, "Z", "C", "RP"]):
    """split_tf32_t's halves (X[z].T as K-major (N, KP) hi and lo, zeros past R) from (32, 128) tiles of X transposed
    in registers (`TW_LAYOUT`); the grid is (cdiv(RP, 32), cdiv(C, 128), Z)."""
    z = tp.block_id(2)
    r0 = tp.block_id(0) * 32
    c0 = tp.block_id(1) * 128
    x = tp.load(X[z, r0:r0 + 32, c0:c0 + 128], layout=TW_LAYOUT)
    hi = tp.round_tf32(x)
    tp.store(HI[z, c0:c0 + 128, r0:r0 + 32], hi.T)
    tp.store(LO[z, c0:c0 + 128, r0:r0 + 32], tp.round_tf32(x - hi).T)


# The register-A twin of each wgmma .tf32 instruction, named directly (a candidate module may not reach
# attributes by string: the agent's policy refuses getattr)
_RS_TF32 = {tp.nv.wgmma_m64n8k8_tf32.name: tp.nv.wgmma_m64n8k8_tf32_rs,
            tp.nv.wgmma_m64n16k8_tf32.name: tp.nv.wgmma_m64n16k8_tf32_rs,
            tp.nv.wgmma_m64n32k8_tf32.name: tp.nv.wgmma_m64n32k8_tf32_rs,
            tp.nv.wgmma_m64n48k8_tf32.name: tp.nv.wgmma_m64n48k8_tf32_rs,
            tp.nv.wgmma_m64n64k8_tf32.name: tp.nv.wgmma_m64n64k8_tf32_rs,
            tp.nv.wgmma_m64n80k8_tf32.name: tp.nv.wgmma_m64n80k8_tf32_rs,
            tp.nv.wgmma_m64n96k8_tf32.name: tp.nv.wgmma_m64n96k8_tf32_rs,
            tp.nv.wgmma_m64n112k8_tf32.name: tp.nv.wgmma_m64n112k8_tf32_rs,
            tp.nv.wgmma_m64n128k8_tf32.name: tp.nv.wgmma_m64n128k8_tf32_rs,
            tp.nv.wgmma_m64n192k8_tf32.name: tp.nv.wgmma_m64n192k8_tf32_rs,
            tp.nv.wgmma_m64n256k8_tf32.name: tp.nv.wgmma_m64n256k8_tf32_rs}


def rs_instr(instr):
    """The register-A twin of a wgmma .tf32 instruction (A_RAW: the consumers' split A is the A operand)."""
    return _RS_TF32[instr.name]


@tp.kernel(threads=_threads, target="sm_90a")
def gemm_fp32(AH: tp.Tensor[tp.f32, "BA", "M", "K"], AL: tp.Tensor[tp.f32, "BA", "M", "K"],
              BH: tp.Tensor[tp.f32, "BB", "N", "K"], BL: tp.Tensor[tp.f32, "BB", "N", "K"],
              C: tp.Tensor[tp.f32, "BC", "M", "N"],
              BM: tp.constexpr = 128, BN: tp.constexpr = 128, BK: tp.constexpr = 32, STAGES: tp.constexpr = 3,
              CONSUMERS: tp.constexpr = 2, INSTR: tp.constexpr = tp.nv.wgmma_m64n128k8_tf32,
              PROMOTE: tp.constexpr = True, SWIZZLE: tp.constexpr = tp.Swizzle(3, 2, 3),
              GROUP_M: tp.constexpr = 8, KSPLIT: tp.constexpr = 1, PASSES: tp.constexpr = 3,
              A_RAW: tp.constexpr = 0, WAIT_ONCE: tp.constexpr = 0, PRODUCER_REGS: tp.constexpr = 0,
              CONSUMER_REGS: tp.constexpr = 0, C_T: tp.constexpr = 0, A_KN: tp.constexpr = 0,
              TMA_ONLY: tp.constexpr = 0):
    """C[z] = (AH + AL)[z] @ (BH + BL)[zb].T from the TF32 halves (K-major, K % 4 == 0); zb = min(z, BB - 1).
    Split-K (KSPLIT > 1): block z' = z * KSPLIT + q of the grid's z sums the q-th share of the k-tiles into
    C[z'] (C holds BA * KSPLIT partial products; the caller adds them up).
    A_RAW=1: AH is A itself (plain f32, K % 4 == 0; AL is not read: pass AH again) and the consumers split
    each A tile in registers (hi = round_tf32(a), lo = round_tf32(a - hi): the same bits as split_tf32's),
    feeding wgmma's register-A form; only B comes pre-split.
    C_T=1 (`gemm_fp32_ct`, C given as (BC, N, M)): the tile is stored transposed, C[z] = ((AH + AL) @ (BH +
    BL).T).T; with A_RAW, the swap-AB form of a skinny product (`launch`'s SWAP): out = x @ W.T computed as
    (W @ x.T).T with the weight W read as it is, split in registers, and only the few rows of x pre-split.
    A_KN=1 (with A_RAW; `gemm_fp32_kt`, AH given as (BA, K, M)): A is read M-major, the (BK, BM) tile staged in
    32-column blocks of 128-byte rows under the 128-byte swizzle (2-way bank conflicts), and loaded transposed into
    the register fragments: the swap-AB form of out = x @ B for a (K, N) B (torch.matmul's weight), (B.T @ x.T).T
    with B read as it is. A_KN=2: the (BK, BM) tile row-major and unswizzled (4-way bank conflicts, but a thread's
    16 fragment loads are one address register plus offsets, where the swizzled blocks' take 16: at BN=128 those
    spill in the k-loop)."""
    zc = tp.block_id(2)
    z = zc // KSPLIT
    zb = tp.min(z, BH.shape[0] - 1)     # a B with one batch serves them all
    # Grouped (L2-friendly) tile order: GROUP_M row tiles sweep the columns together, so the blocks running
    # at once share their A rows and B columns in L2. Any grid of cdiv(M, BM) * cdiv(N, BN) blocks in x and y
    # serves: (tiles, 1) or (row tiles, column tiles) alike.
    pid = tp.block_id(0) + tp.num_blocks(0) * tp.block_id(1)
    MA = AH.shape[2] if A_KN else AH.shape[1]       # A's rows and its K (A_KN: AH is (BA, K, M))
    KA = AH.shape[1] if A_KN else AH.shape[2]
    num_m = tp.cdiv(MA, BM)
    in_group = GROUP_M * tp.cdiv(BH.shape[1], BN)
    first_m = (pid // in_group) * GROUP_M
    group_m = num_m - first_m if num_m - first_m < GROUP_M else GROUP_M   # the last group may be short
    m0 = (first_m + (pid % in_group) % group_m) * BM
    n0 = ((pid % in_group) // group_m) * BN
    if A_KN == 2:   # the (BK, BM) tile row-major, unswizzled: one address register a thread (4-way bank conflict)
        a_hi = tp.shared((BK, BM), tp.f32, stages=STAGES)
    elif A_KN:    # the (BK, BM) tile as BM // 32 blocks of (BK, 32): rows of 128 bytes, one TMA box each
        a_hi = tp.shared((BK, BM), tp.f32, stages=STAGES, swizzle=SWIZZLE,
                         layout=tp.Layout((BK, (32, BM // 32)), (32, (1, 32 * BK))))
    else:
        a_hi = tp.shared((BM, BK), tp.f32, stages=STAGES, swizzle=SWIZZLE)
    # (A_RAW: the tail is made in registers, so its shared tile is a token 8 rows of one stage)
    a_lo = tp.shared((8 if A_RAW else BM, BK), tp.f32, stages=STAGES if PASSES == 3 and not A_RAW else 1,
                     swizzle=SWIZZLE)
    b_hi = tp.shared((BN, BK), tp.f32, stages=STAGES, swizzle=SWIZZLE)   # K-major: the (N, K) tile
    b_lo = tp.shared((BN, BK), tp.f32, stages=STAGES if PASSES == 3 else 1, swizzle=SWIZZLE)
    # full[s]: the four copies into stage s landed; empty[s]: the consumers are done reading stage s.
    full0 = tp.mbarrier(1)
    full1 = tp.mbarrier(1)
    full2 = tp.mbarrier(1)
    full3 = tp.mbarrier(1)
    empty0 = tp.mbarrier(1)
    empty1 = tp.mbarrier(1)
    empty2 = tp.mbarrier(1)
    empty3 = tp.mbarrier(1)
    full = (full0, full1, full2, full3)
    empty = (empty0, empty1, empty2, empty3)
    if A_KN:
        tp.tag(AH, lambda b, k, i: ("A", i, k))
        tp.tag(AL, lambda b, k, i: ("A", i, k))
    else:
        tp.tag(AH, lambda b, i, k: ("A", i, k))
        tp.tag(AL, lambda b, i, k: ("A", i, k))
    tp.tag(BH, lambda b, j, k: ("B", k, j))
    tp.tag(BL, lambda b, j, k: ("B", k, j))
    k_share = tp.cdiv(tp.cdiv(KA, BK), KSPLIT)
    k_first = (zc % KSPLIT) * k_share        # this block's k-tiles: k_first .. k_first + k_tiles - 1
    k_tiles = tp.min(k_share, tp.cdiv(KA, BK) - k_first)
    rounds = tp.cdiv(k_tiles, STAGES)   # round j uses every stage once: tile k = j * STAGES + s
    LC = tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1))   # the accumulator's layout (also an epilogue's)
    RS = rs_instr(INSTR)                # A_RAW: the instruction with A in registers, and its A fragments
    LA = tp.mma_layout(RS, "a", (BM, BK), (CONSUMERS, 1))
    if tp.warpgroup_id() == 0:          # producer warpgroup: one thread issues the bulk tensor copies
        if PRODUCER_REGS > 0:
            tp.setmaxnreg(PRODUCER_REGS)
        for j in range(rounds):
            for s in tp.static_range(STAGES):
                k = j * STAGES + s
                if k < k_tiles:
                    if j > 0:
                        tp.mbarrier_wait(empty[s], j - 1)    # the consumers released stage s (round j - 1)
                    k0 = (k_first + k) * BK
                    if A_KN:
                        tp.copy_bulk(AH[z, k0:k0 + BK, m0:m0 + BM], a_hi[s], full[s], fallback=TMA_ONLY == 0)
                    else:
                        tp.copy_bulk(AH[z, m0:m0 + BM, k0:k0 + BK], a_hi[s], full[s], fallback=TMA_ONLY == 0)
                    if PASSES == 3 and not A_RAW:
                        tp.copy_bulk(AL[z, m0:m0 + BM, k0:k0 + BK], a_lo[s], full[s], fallback=TMA_ONLY == 0)
                    tp.copy_bulk(BH[zb, n0:n0 + BN, k0:k0 + BK], b_hi[s], full[s], fallback=TMA_ONLY == 0)
                    if PASSES == 3:
                        tp.copy_bulk(BL[zb, n0:n0 + BN, k0:k0 + BK], b_lo[s], full[s], fallback=TMA_ONLY == 0)
                    tp.mbarrier_arrive(full[s])
    else:                               # consumers: three TF32 products per k-tile, small terms first
        if CONSUMER_REGS > 0:
            tp.setmaxnreg(CONSUMER_REGS)
        acc = tp.zeros((BM, BN), tp.f32, layout=LC)
        for j in range(rounds):
            for s in tp.static_range(STAGES):
                k = j * STAGES + s
                if k < k_tiles:
                    tp.mbarrier_wait(full[s], j)             # stage s holds tile k
                    if A_RAW:                                # A's tile split here, in the fragment's registers
                        ra = tp.load(a_hi[s].T if A_KN else a_hi[s], layout=LA)
                        ah = tp.round_tf32(ra)
                        if PASSES == 1:
                            acc = tp.mma(ah, b_hi[s].T, acc, instr=RS)
                            tp.mbarrier_arrive(empty[s])
                        else:
                            al = tp.round_tf32(ra - ah)      # ra - ah is exact in f32
                            part = tp.zeros((BM, BN), tp.f32, layout=LC)
                            if WAIT_ONCE:                    # three wgmma groups in flight, one wait
                                part = tp.mma_async(al, b_hi[s].T, part, instr=RS)
                                part = tp.mma_async(ah, b_lo[s].T, part, instr=RS)
                                part = tp.mma_async(ah, b_hi[s].T, part, instr=RS)
                                tp.mma_wait(0)
                            else:
                                part = tp.mma(al, b_hi[s].T, part, instr=RS)
                                part = tp.mma(ah, b_lo[s].T, part, instr=RS)
                                part = tp.mma(ah, b_hi[s].T, part, instr=RS)
                            # A's tags: (t,) for the head, ((t, (t,)),) for the tail (elementwise results are
                            # tagged with their operands' tags); t[2] is the contraction index either way
                            tp.assert_tag(tp.mma_operands(part), lambda a, b: (
                                (a[0][0] == "A" and a[0][2] == b[1]) or (a[0][0] != "A" and a[0][0][2] == b[1])))
                            tp.mbarrier_arrive(empty[s])
                            acc = acc + part
                    elif PASSES == 1:                        # TF32 (--precision tf32): one product
                        acc = tp.mma(a_hi[s], b_hi[s].T, acc)
                        tp.mbarrier_arrive(empty[s])
                    elif PROMOTE:
                        part = tp.zeros((BM, BN), tp.f32, layout=LC)
                        part = tp.mma(a_lo[s], b_hi[s].T, part)
                        part = tp.mma(a_hi[s], b_lo[s].T, part)
                        part = tp.mma(a_hi[s], b_hi[s].T, part)
                        tp.assert_tag(tp.mma_operands(part), lambda a, b: a[2] == b[1])
                        tp.mbarrier_arrive(empty[s])         # the chains completed: stage s is free
                        acc = acc + part                     # round-to-nearest f32 adds across k-tiles
                    else:
                        acc = tp.mma(a_lo[s], b_hi[s].T, acc)
                        acc = tp.mma(a_hi[s], b_lo[s].T, acc)
                        acc = tp.mma(a_hi[s], b_hi[s].T, acc)
                        tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
                        tp.mbarrier_arrive(empty[s])
        if C_T:                             # (gemm_fp32_ct: C is (BC, N, M))
            tp.store(C[zc, n0:n0 + BN, m0:m0 + BM], acc.T)
        else:
            tp.store(C[zc, m0:m0 + BM, n0:n0 + BN], acc)   # EPILOGUE (a lowering may fuse a pointwise chain here)


gemm_fp32_ct = gemm_fp32.retyped(C=tp.Tensor[tp.f32, "BC", "N", "M"])    # launch these with C_T=1
# A read M-major (A_KN=1, A_RAW=1, C_T=1): the swap-AB form for a (K, N) B
gemm_fp32_kt = gemm_fp32.retyped(AH=tp.Tensor[tp.f32, "BA", "KA", "M"], AL=tp.Tensor[tp.f32, "BA", "KA", "M"],
                                 C=tp.Tensor[tp.f32, "BC", "N", "M"])


PRESETS = {
    # 128x128 tiles, 3 stages of a_hi, a_lo, b_hi, b_lo (16 KB each): 192 KB of shared memory
    "sm_90a": dict(BM=128, BN=128, BK=32, STAGES=3, CONSUMERS=2, INSTR=tp.nv.wgmma_m64n128k8_tf32),
}
# A split in the consumers' registers (A_RAW): three tiles a stage (a, b_hi, b_lo), so 4 stages fit in 192 KB;
# the three chains as asynchronous groups waited once (WAIT_ONCE): H100, 4096^3 1228 us against 1386 with a
# wait after each chain and 1296 for the split form (benchmarks/results/gemm-fp32-raw-*.json)
RAW = dict(A_RAW=1, STAGES=4, WAIT_ONCE=1)


def raw_ok(K: int) -> bool:
    """Whether A can be read as it is (A_RAW): the bulk tensor copy needs its rows 16-byte multiples."""
    return K % 4 == 0


SMS = 132                 # H100 SXM's streaming multiprocessors
MIN_SHARE = 8             # split-K: at least this many k-tiles a block (the pipeline's fill and the partial
                          # products' extra traffic are paid once per share)


def policy(M: int, N: int, K: int, batch: int = 1, sms: int | None = None, bn: int | None = None) -> dict:
    """The constexprs `launch` adds when the caller names no tile: split-K where the output tiles (128 x 128,
    the preset) leave SMs idle and K is long. KSPLIT = S runs S blocks a tile, so tiles x S fills at most one
    wave of `sms` and each share keeps >= MIN_SHARE k-tiles; the shares are evened out (no empty share).
    128 x 4096 x 4096: 32 tiles x 4 shares of 32 k-tiles; 4096^3: {} (1024 tiles). `bn`: tiles that wide instead
    of the preset's."""
    p, sms = PRESETS["sm_90a"], sms or SMS
    tiles = batch * -(-M // p["BM"]) * -(-N // (bn or p["BN"]))
    kt = -(-K // p["BK"])
    ks = min(sms // tiles, kt // MIN_SHARE)
    if ks < 2:
        return {}
    return {"KSPLIT": -(-kt // -(-kt // ks))}   # as many shares as cdiv(kt, ks)-long shares need


NARROW_KT = 32           # launch_policy: 64-wide unsplit tiles only up to this many k-tiles (K <= 1024)
# launch_policy's tile widths by waves: 96-wide tiles where the waves of blocks they take, times their width, come
# to at most WAVE_GAIN of 128-wide tiles' (the last wave of 128-wide tiles is mostly idle SMs and the 96-wide tiles'
# is fuller). H100, rotated, x SGEMM, two alternated rounds (benchmarks/NOTES.md G36, results/gemm-fp32-g36-call1-*):
# 2051 x 2045 x 1000 (272 -> 374 tiles, 3 waves either way) 1.61-1.62 -> 2.01-2.05, 1536^3 (144 -> 192 tiles, 2
# waves) 1.63 -> 2.11; 2048^3 (2 -> 3 waves) 2.12-2.21 -> 1.90-2.04 (stays 128); 3000 x 5000 x 4096 (8 x 128 ->
# 10 x 96, 0.94) 2.01-2.10 -> 2.11-2.13, within the spread (stays 128).
WAVE_GAIN = 0.9
# TMA_ONLY (the operands' copies without their per-element fallback compiled in) on the tiles narrower than 128: the
# fallback took registers the consumers needed (128 x 64: 168 registers and 88 bytes of spill stores -> 122, none)
# H100, rotated: 1024^3 1.73-1.76 -> 2.04-2.08. Not on 128-wide tiles (168 registers either way, 0 -> 256 bytes of
# spill stores: 2048^3 2.12-2.21 -> 1.91-1.92) except the "kn" swap form's (8 -> 20 bytes, in the transposed store):
# 128 x 4096 x 4096 1.87-1.88 -> 2.00-2.02.
_N64, _N96 = tp.nv.wgmma_m64n64k8_tf32, tp.nv.wgmma_m64n96k8_tf32
# A short K whose 128 x 64 tiles fill less than half a wave: 64 x 64 tiles, one consumer warpgroup, unsplit (G36)
SMALL_64 = dict(BM=64, BN=64, CONSUMERS=1, INSTR=_N64, TMA_ONLY=1)


def waves(tiles: int, sms: int | None = None) -> int:
    """Rounds of one block an SM that `tiles` blocks take."""
    return -(-tiles // (sms or SMS))


def launch_policy(M: int, N: int, K: int, batch: int = 1, sms: int | None = None) -> dict:
    """What `launch` adds when the caller names no tile: `policy`'s split-K, except
    * a short K (<= NARROW_KT k-tiles) where it would split 128 x 128 tiles that as 128 x 64 tiles (BN=64) fill at
      least 3/4 of a wave of `sms` unsplit: those, with no partial products to add up. H100, x SGEMM through launch
      (benchmarks/NOTES.md G20): 1024^3 (32 k-tiles) split 2 1.57-1.60 -> 1.77-1.78; with longer K the split won (512
      x 2048 x 2048, 64 k-tiles: 1.47 split, 1.43 narrow; 256 x 4096 x 4096, 128 k-tiles: 1.15 / 1.05), hence
      NARROW_KT;
    * unsplit, 128 x 96 tiles where their waves (`waves`) times 96 are at most WAVE_GAIN of 128 x 128 tiles' waves
      times 128.
    Both narrower forms take TMA_ONLY (`launch` drops it for an A whose base a tensor map cannot take). The lowering
    keeps `policy` (its split_k)."""
    pol, sms = policy(M, N, K, batch, sms), sms or SMS
    rows = batch * -(-M // PRESETS["sm_90a"]["BM"])
    narrow = rows * -(-N // 64)
    if pol.get("KSPLIT", 1) > 1 and -(-K // PRESETS["sm_90a"]["BK"]) <= NARROW_KT:
        if 2 * narrow >= sms and narrow <= sms:
            return {"BN": 64, "INSTR": _N64, "TMA_ONLY": 1}
        if batch * -(-M // 64) * -(-N // 64) <= 2 * sms:     # (two blocks an SM: 122 registers, 96 KB)
            return dict(SMALL_64)
    if (pol.get("KSPLIT", 1) == 1
            and waves(rows * -(-N // 96), sms) * 96 <= WAVE_GAIN * waves(rows * -(-N // 128), sms) * 128):
        return {"BN": 96, "INSTR": _N96, "TMA_ONLY": 1}
    return pol


def tma_ok(x) -> bool:
    """Whether a tensor map can describe `x` for TMA_ONLY's copies: contiguous, its base 16-byte aligned (its rows are
    16-byte multiples where the forms read it as it is). numpy arrays (the interpreter) always."""
    if isinstance(x, np.ndarray):
        return True
    return bool(x.is_contiguous()) and x.data_ptr() % 16 == 0


def tile_named(constexprs) -> bool:
    """Whether the caller chose the tiling (then the policy stays out)."""
    return any(k in constexprs for k in ("BM", "BN", "BK", "KSPLIT", "CONSUMERS", "INSTR"))


def _as3(x):
    return x if x.ndim == 3 else x.reshape(1, *x.shape)


def _empty(like, shape):
    if isinstance(like, np.ndarray):
        return np.zeros(shape, np.float32)
    import torch

    return torch.empty(shape, dtype=torch.float32, device=like.device)


# A "kn" B's transposed split by split_tf32_tw ((32, 128) tiles transposed in registers) rather than split_tf32_t
# ((32, 32) tiles through shared memory): off. H100, rotated, two alternated rounds (benchmarks/NOTES.md G38,
# results/gemm-fp32-g38-call1-*): the pass alone 5.4 -> 5.1 us at 1024^3, 8.9 -> 8.2 at 2051 x 2045 x 1000, 74.1 ->
# 75.9 at 4096^3 (both at 2.3-3.0 TB/s counting B read and its halves written, past a device copy's 1.8-2.9), and the
# whole call no faster (1024^3 27.5 / 27.8 -> 27.8 / 28.4 us, 2051 x 2045 x 1000 100.1 / 101.9 -> 100.1 / 102.4)
KN_SPLIT_WIDE = False


def split(x, b_layout: str = "nk"):
    """(hi, lo): the TF32 halves of an operand, 3-D, K-major, K padded to a multiple of 4. `x` is an A
    ((BATCH,) M, K) or an "nk" B ((BATCH,) N, K) as it is, or a "kn" B ((BATCH,) K, N), transposed."""
    x3 = _as3(x)
    if b_layout == "kn":
        Z, K, N = x3.shape
        KP = -(-K // 4) * 4
        hi, lo = _empty(x, (Z, N, KP)), _empty(x, (Z, N, KP))
        if KN_SPLIT_WIDE:
            split_tf32_tw[(tp.cdiv(KP, 32), tp.cdiv(N, 128), Z)](x3, hi, lo)
        else:
            split_tf32_t[(tp.cdiv(KP, 32), tp.cdiv(N, 32), Z)](x3, hi, lo)
        return hi, lo
    if b_layout != "nk":
        raise ValueError(f"b_layout is 'kn' ((K, N), torch.matmul) or 'nk' ((N, K), F.linear), not {b_layout!r}")
    Z, R, K = x3.shape
    KP = -(-K // 4) * 4
    hi, lo = _empty(x, (Z, R, KP)), _empty(x, (Z, R, KP))
    split_tf32[(tp.cdiv(Z * R, 16), tp.cdiv(KP, 128))](x3.reshape(Z * R, K), hi.reshape(Z * R, KP),
                                                        lo.reshape(Z * R, KP))
    return hi, lo


def grid(a, c, **constexprs):
    """The GEMM's launch grid: (cdiv(M, BM) * cdiv(N, BN), 1, BATCH) (the kernel orders the tiles itself;
    (cdiv(M, BM), cdiv(N, BN), BATCH) works as well)."""
    p = {**PRESETS["sm_90a"], **constexprs}
    a3, c3 = _as3(a), _as3(c)
    return (tp.cdiv(a3.shape[1], p["BM"]) * tp.cdiv(c3.shape[2], p["BN"]), 1, a3.shape[0])


def launch_split(a_split, b_split, c, target: str = "sm_90a", **constexprs):
    """c = a @ b from `split` halves: a_split = split(a), b_split = split(b, b_layout)."""
    (ah, al), (bh, bl) = a_split, b_split
    c3 = _as3(c)
    if (ah.shape[2] != bh.shape[2] or bh.shape[1] != c3.shape[2] or c3.shape[:2] != ah.shape[:2]
            or bh.shape[0] not in (1, ah.shape[0])):
        raise ValueError(f"shapes do not agree: a halves {tuple(ah.shape)}, b halves {tuple(bh.shape)} (N, K), "
                         f"c {tuple(c.shape)}")
    params = {**PRESETS["sm_90a"], **constexprs}
    ks = params.get("KSPLIT", 1)
    if ks == 1:
        return gemm_fp32[grid(ah, c3, **constexprs)](ah, al, bh, bl, c3, target=target, **params)
    # split-K: KSPLIT partial products per batch, added up here (a lowering adds them with a reduction kernel)
    part = _empty(c3, (c3.shape[0] * ks,) + tuple(c3.shape[1:]))
    g = grid(ah, c3, **constexprs)
    trace = gemm_fp32[(g[0], g[1], g[2] * ks)](ah, al, bh, bl, part, target=target, **params)
    part = part.reshape(c3.shape[0], ks, *c3.shape[1:])
    if isinstance(part, np.ndarray):
        np.sum(part, axis=1, out=c3)
    else:
        import torch

        torch.sum(part, dim=1, out=c3)
    return trace


def launch_raw(a, b_split, c, target: str = "sm_90a", **constexprs):
    """c = a @ b from a plain f32 `a` ((BATCH,) M, K), K % 4 == 0, and `split` halves of b: the GEMM splits A
    in registers (A_RAW; RAW's 4 stages unless given), so A is read once and never written back."""
    a3 = _as3(a)
    if not constexprs.get("PROMOTE", True):
        raise ValueError("A_RAW always adds each k-tile's products into the sum with f32 adds (PROMOTE): for one "
                         "accumulator, split A first (launch_split(split(a), ...), or launch with A_RAW=0)")
    if not raw_ok(a3.shape[2]):
        raise ValueError(f"A_RAW reads A with the bulk tensor copy, whose rows must be 16-byte multiples: K = "
                         f"{a3.shape[2]} is not a multiple of 4; split A first (launch_split(split(a), ...))")
    return launch_split((a3, a3), b_split, c, target=target, **{**RAW, **constexprs})


# Swap-AB for skinny rows (out = x @ W.T or x @ B, x few rows): computed as out^T = W @ x.T by gemm_fp32_ct with A_RAW
# (an "nk" weight W, (N, K)), or out^T = B.T @ x.T by gemm_fp32_kt with A_RAW and A_KN (a "kn" B, (K, N), read M-major
# and loaded transposed into the register fragments), so the weight, the one large operand, is read once as it is (split
# in the consumers' registers) and only x's few rows are split by a pass (the unswapped form split the whole weight, 2 x
# its bytes written and read back, on every call). The kernel's columns are x's rows: BN = M rounded up to 16, 32, 64
# or 128 (the tf32 instruction's N, less padding than 128-wide tiles), 4 stages (the kernel's named mbarriers), split-K
# by `policy`. "kn" stages B's (BK, BM) tile row-major and unswizzled (KN_FORM 2: a thread's 16 transposed fragment
# loads are one address register plus offsets, 4-way bank conflicts); in 128-byte-swizzled 32-column blocks (KN_FORM
# 1, 2-way conflicts) those loads take 16 address registers and at 128 columns the consumers spill in the k-loop, so
# that form stops at 64 columns. H100, x SGEMM (torch.matmul), two rounds (benchmarks/results/gemm-fp32-kn-g25-call2-*):
# 128 / 256 x 4096 x 4096 1.40-1.42 / 1.61-1.63 (form 1) -> 1.87-1.88 / 2.13-2.22 (form 2), 128 x 14336 x 4096 1.56-1.58
# -> 2.49-2.51; 16-64 rows (the same column tiles) within 1% of each other.
_TF32_N = {16: tp.nv.wgmma_m64n16k8_tf32, 32: tp.nv.wgmma_m64n32k8_tf32, 64: tp.nv.wgmma_m64n64k8_tf32,
           128: tp.nv.wgmma_m64n128k8_tf32}
SWAP_ROWS = 256           # launch swaps products of at most this many rows (unbatched; "nk": K % 4 == 0, "kn": N % 4)
KN_FORM = 2               # the "kn" swap's A_KN (gemm_fp32_kt's staged B tile: 1 swizzled blocks, 2 row-major)
KN_BN = {1: 64, 2: 128}   # the widest column tile of each
# The "kn" swap takes TMA_ONLY (see WAVE_GAIN's note); at 128 columns with register budgets (setmaxnreg 40 for the
# producer, 232 for the consumers): without them ptxas spilled at 168 registers a thread, loads and stores of the stack
# in the k-loop (20 bytes with TMA_ONLY, 8 without), none with them
KN_REGS = dict(PRODUCER_REGS=40, CONSUMER_REGS=232)


def swap_params(M: int, N: int, K: int, sms: int | None = None, b_layout: str = "nk", kn_form: int = 0) -> dict:
    """The swap kernel's constexprs (gemm_fp32_ct for "nk", gemm_fp32_kt for "kn", A_KN = kn_form or KN_FORM) for
    out (M, N) = x (M, K) @ W (N, K).T or x @ B (K, N) by swap-AB (see SWAP_ROWS)."""
    p = PRESETS["sm_90a"]
    form = kn_form or KN_FORM
    bn = next(r for r in (16, 32, 64, 128) if r >= min(M, 128 if b_layout == "nk" else KN_BN[form]))
    kn = {"A_KN": form, "TMA_ONLY": 1} if b_layout == "kn" else {}
    regs = {"TMA_ONLY": 1, **KN_REGS} if bn == 128 else {}     # (both layouts at 128 columns)
    return {**p, **RAW, "BN": bn, "INSTR": _TF32_N[bn], "C_T": 1, **kn, **regs, **policy(N, M, K, sms=sms, bn=bn)}


def _swap_layout_ok(a3, b3, b_layout: str) -> bool:
    """The swap form's operand rows are 16-byte multiples (TMA reads the weight as it is): "nk" K % 4, "kn" N % 4."""
    return b_layout in ("nk", "kn") and (raw_ok(a3.shape[2]) if b_layout == "nk" else b3.shape[2] % 4 == 0)


def swap_ok(a, b, b_layout: str, constexprs: dict) -> bool:
    """Whether `launch` runs the swap-AB form: asked (SWAP=1), or by default for an unbatched product of at most
    SWAP_ROWS rows whose weight TMA can read as it is ("nk": K % 4 == 0; "kn": N % 4 == 0), no tile, form (A_RAW)
    or precision (PASSES, PROMOTE) named."""
    swap = constexprs.get("SWAP")
    if swap is not None:
        return bool(swap)
    a3, b3 = _as3(a), _as3(b)
    return (a3.shape[0] == 1 and b3.shape[0] == 1 and a3.shape[1] <= SWAP_ROWS and _swap_layout_ok(a3, b3, b_layout)
            and not tile_named(constexprs) and not any(k in constexprs for k in ("A_RAW", "PASSES", "PROMOTE")))


def launch_swap(a, w, c, target: str = "sm_90a", b_layout: str = "nk", **constexprs):
    """c = a @ w.T for a (M, K) and an "nk" weight w (N, K), K % 4 == 0, or c = a @ w for a "kn" w (K, N), N % 4 ==
    0, by swap-AB (SWAP_ROWS): the GEMM reads w as it is and splits it in registers; a is split by one pass."""
    a3, w3, c3 = _as3(a), _as3(w), _as3(c)
    if a3.shape[0] != 1 or w3.shape[0] != 1 or not _swap_layout_ok(a3, w3, b_layout):
        need = "an (N, K) weight with K % 4 == 0" if b_layout == "nk" else "a (K, N) weight with N % 4 == 0"
        raise ValueError(f"gemm_fp32 swap-AB (SWAP=1) takes one (M, K) a and {need}, got a {tuple(a.shape)}, w "
                         f"{tuple(w.shape)} ({b_layout}): launch with SWAP=0")
    M, K = a3.shape[1:]
    N, KW = (w3.shape[1], w3.shape[2]) if b_layout == "nk" else (w3.shape[2], w3.shape[1])
    if KW != K or tuple(c3.shape) != (1, M, N):
        raise ValueError(f"shapes do not agree: a {tuple(a.shape)}, w {tuple(w.shape)} ({b_layout}), c "
                         f"{tuple(c.shape)}")
    params = {**swap_params(M, N, K, b_layout=b_layout), **{k: v for k, v in constexprs.items() if k != "SWAP"}}
    if params.get("TMA_ONLY") and "TMA_ONLY" not in constexprs and not tma_ok(w):
        # the weight is read as it is: its tensor map needs a 16-byte aligned base; the form before G36 then (the
        # copies' fallback, no register budgets: a producer of 40 registers would spill the fallback's addresses)
        params["TMA_ONLY"] = 0
        params.update({k: 0 for k in KN_REGS if k not in constexprs})
    if params.get("PASSES", 3) != 3 or not params.get("PROMOTE", True) or not params.get("A_RAW") \
            or not params.get("C_T") or bool(params.get("A_KN")) != (b_layout == "kn"):
        raise ValueError("gemm_fp32 swap-AB reads the weight raw (A_RAW=1, three promoted passes; A_KN=1 for a 'kn' "
                         "weight) and stores the transposed tile (C_T=1); launch with SWAP=0 for other forms")
    kernel = gemm_fp32_kt if b_layout == "kn" else gemm_fp32_ct
    xh, xl = split(a3, "nk")
    ks = params.get("KSPLIT", 1)
    g = (tp.cdiv(N, params["BM"]) * tp.cdiv(M, params["BN"]), 1, ks)
    if ks == 1:
        return kernel[g](w3, w3, xh, xl, c3, target=target, **params)
    part = _empty(c3, (ks, M, N))
    trace = kernel[g](w3, w3, xh, xl, part, target=target, **params)
    if isinstance(part, np.ndarray):
        np.sum(part, axis=0, out=c3[0])
    else:
        import torch

        torch.sum(part, dim=0, out=c3[0])
    return trace


def launch(a, b, c, b_layout: str = "kn", target: str = "sm_90a", **constexprs):
    """c = a @ b (b_layout="kn") or a @ b.T (b_layout="nk") in fp32 accuracy; see the module docstring. A is
    split in the GEMM's registers (A_RAW) where K % 4 == 0, else by a split pass first; A_RAW=0 forces that.
    An unbatched product of at most SWAP_ROWS rows runs swap-AB (`launch_swap`; SWAP=0 keeps the form above)."""
    if b_layout not in ("kn", "nk"):
        raise ValueError(f"b_layout is 'kn' ((K, N), torch.matmul) or 'nk' ((N, K), F.linear), not {b_layout!r}")
    a3, b3 = _as3(a), _as3(b)
    kb = b3.shape[1] if b_layout == "kn" else b3.shape[2]
    if kb != a3.shape[2]:
        raise ValueError(f"shapes do not agree: a {tuple(a.shape)}, b {tuple(b.shape)} ({b_layout}), c "
                         f"{tuple(c.shape)}")
    if swap_ok(a, b, b_layout, constexprs):   # few rows of x @ W.T or x @ B: the weight read as it is (SWAP_ROWS)
        return launch_swap(a, b, c, target=target, b_layout=b_layout, **constexprs)
    constexprs.pop("SWAP", None)
    if not tile_named(constexprs):        # split-K (or narrower tiles) where the tiles leave SMs idle
        pol = launch_policy(a3.shape[1], c.shape[-1], a3.shape[2], a3.shape[0])
        if pol.get("TMA_ONLY") and "TMA_ONLY" not in constexprs and not tma_ok(a):
            pol.pop("TMA_ONLY")     # A is read as it is (A_RAW): its tensor map needs a 16-byte aligned base
        constexprs = {**pol, **constexprs}
    raw = constexprs.get("A_RAW")     # unnamed: raw where TMA can read A and the sum is promoted (the default)
    if raw or (raw is None and raw_ok(a3.shape[2]) and constexprs.get("PROMOTE", True)):
        return launch_raw(a3, split(b, b_layout), c, target=target, **constexprs)
    constexprs.pop("A_RAW", None)
    return launch_split(split(a), split(b, b_layout), c, target=target, **constexprs)


def reference(a, b, b_layout: str = "kn"):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return a @ (b if b_layout == "kn" else np.swapaxes(b, -1, -2))


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    a = rng.standard_normal((100, 72)).astype(np.float32)
    b = rng.standard_normal((72, 90)).astype(np.float32)
    c = np.full((100, 90), np.nan, np.float32)
    launch(a, b, c, STAGES=2)
    ref = reference(a, b)
    print("rel err =", float(np.linalg.norm(c - ref) / np.linalg.norm(ref)))
