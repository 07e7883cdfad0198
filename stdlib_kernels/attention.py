"""Forward attention O = softmax(Q K^T * scale) V on Hopper (sm_90a), FlashAttention-3 shaped: bf16 in and out,
fp32 softmax statistics, head dims 64 and 128, causal or not, grouped-query attention.

Tensors are flattened over (batch, head): Q, O are (B * H, SQ, D), K, V are (B * HKV, SKV, D) with
H = GROUP * HKV, so query head bh reads KV head bh // GROUP. LSE (B * H, SQ) receives each row's natural-log
sum of exponentials (what a split-KV merge needs). Causal masking is top-left aligned (key j is visible to
query i when j <= i), as torch's `is_causal`.

One block computes BM = 64 * CONSUMERS query rows of one head:

* warpgroup 0 is the producer: one thread loads the Q tile once (bulk tensor copies, TMA), then streams K and V
  tiles of BN keys into a ring of STAGES shared-memory stages; `full[s]` completes when stage s has landed,
* warpgroups 1.. are the consumers, 64 query rows each: S = Q K^T on wgmma from shared-memory descriptors (Q and
  K in 64-column pieces: a 128-byte swizzle atom per row, K read K-major through `.T`), the online softmax in
  registers (running row max m and sum l in fp32; exp2 with the scale folded in; earlier partial outputs
  rescaled by exp2(m_old - m_new)), then O += P V with P as the register A operand of wgmma (`..._rs`: the
  accumulator of S cast to bf16 is, register for register, the A fragment), and release the stage through
  `empty[s]`,
* causal blocks stop at the diagonal (keys past the block's last row are never loaded), and the heaviest
  row blocks start first; only tiles that cross the diagonal or the end of the keys pay for the mask.

Policies (constexprs): PIPELINE (FlashAttention-3's intra-warpgroup overlap: S_j and P_{j-1} V_{j-1} as
asynchronous wgmma groups, softmax(S_j) under wait_group 1; False waits for every wgmma), STAGES, BN,
CONSUMERS, PRODUCER_REGS / CONSUMER_REGS (setmaxnreg budgets; 0 leaves the registers as they are), FALLBACK
(False: TMA-only copies, `copy_bulk(..., fallback=False)`: the producer compiles to the bulk tensor copies alone,
which its 24-40 register budget holds without spilling; True adds the per-row / per-element copy for tensors a
tensor map cannot describe, which `launch` picks only for such inputs), PAIRED (one tile at a time: a block
computes row blocks m - 1 - pb and then pb, grid cdiv(m, 2), their key tiles through one ring and both Q tiles
loaded up front: half as many blocks, each block's fixed costs (its start, Q's and the ring's first round
trips, the epilogue) paid once for two row blocks and hidden behind the other's tiles; causal pairs carry
equal work).
`attention_decode` + `attention_merge` (`decode()`) are split-KV decoding for up to 16 new tokens.
docs/kernels.md has the structure, the invariants and the H100 figures.

Invariants stated as tags and checked by tilepy-verify: every S product pairs a query and a key element of
the same head-dim index, with the query head reading its own KV head; every P V product pairs a key position
of S with the same row of V.
"""

import math

import numpy as np

import tilepy as tp

NEG = -1.0e30  # the running max before any key: finite, so exp2(NEG - m) is 0, never NaN


def _threads(c):
    return 128 * (1 + c["CONSUMERS"])


def v_layout(BN, D, atom=64):
    """(BN, D) V tile stored as D // atom blocks of row-major (BN, atom): the wgmma MN-major B form."""
    return tp.Layout((BN, (atom, D // atom)), (atom, (1, atom * BN)))


def row_layout(consumers):
    """The rows of a (64 * consumers, N) wgmma accumulator, one value per row a thread holds (rows l1 + 8 v +
    16 warp + 64 warpgroup, replicated over the 4 threads of a quad): the running max and sum, 2 registers."""
    return tp.TVLayout((64 * consumers,), (4, 8, 4, consumers, 1), (2,), (((0, 1, 16, 64, 0), (8,)),), "wgmma.rows")


# The instructions by tile width, named directly (a candidate module may not reach attributes by string: the
# agent's policy refuses getattr)
_S_INSTR = {8: tp.nv.wgmma_m64n8k16_bf16, 16: tp.nv.wgmma_m64n16k16_bf16, 32: tp.nv.wgmma_m64n32k16_bf16,
            64: tp.nv.wgmma_m64n64k16_bf16, 128: tp.nv.wgmma_m64n128k16_bf16, 256: tp.nv.wgmma_m64n256k16_bf16}
_O_INSTR = {8: tp.nv.wgmma_m64n8k16_bf16_rs, 16: tp.nv.wgmma_m64n16k16_bf16_rs, 32: tp.nv.wgmma_m64n32k16_bf16_rs,
            64: tp.nv.wgmma_m64n64k16_bf16_rs, 128: tp.nv.wgmma_m64n128k16_bf16_rs,
            256: tp.nv.wgmma_m64n256k16_bf16_rs}


def s_instr(BN):
    return _S_INSTR[BN]


def o_instr(D):
    return _O_INSTR[D]


@tp.kernel(threads=_threads, target="sm_90a")
def attention_fwd(Q: tp.Tensor[tp.bf16, "BH", "SQ", "D"], K: tp.Tensor[tp.bf16, "BHKV", "SKV", "D"],
                  V: tp.Tensor[tp.bf16, "BHKV", "SKV", "D"], O: tp.Tensor[tp.bf16, "BH", "SQ", "D"],
                  LSE: tp.Tensor[tp.f32, "BH", "SQ"], scale_log2: tp.f32,
                  HEAD_DIM: tp.constexpr = 128, BN: tp.constexpr = 128, STAGES: tp.constexpr = 3,
                  CONSUMERS: tp.constexpr = 2, CAUSAL: tp.constexpr = False, GROUP: tp.constexpr = 1,
                  PIPELINE: tp.constexpr = True, PRODUCER_REGS: tp.constexpr = 24,
                  CONSUMER_REGS: tp.constexpr = 240, FALLBACK: tp.constexpr = False,
                  PAIRED: tp.constexpr = False):
    BM = 64 * CONSUMERS
    DP = HEAD_DIM // 64                 # 64-column pieces of the head dimension
    SW = tp.Swizzle(3, 3, 3)
    ACC_S = tp.accumulator(s_instr(BN), (BM, BN), (CONSUMERS, 1))
    ACC_O = tp.accumulator(o_instr(HEAD_DIM), (BM, HEAD_DIM), (CONSUMERS, 1))
    ROWS = row_layout(CONSUMERS)
    bh = tp.block_id(1)
    kvh = bh // GROUP
    seq_q = Q.shape[1]
    seq_k = K.shape[1]
    m_blocks = tp.cdiv(seq_q, BM)
    mb = m_blocks - 1 - tp.block_id(0) if CAUSAL else tp.block_id(0)   # causal: the longest rows first
    m0 = mb * BM
    # Key tile j runs when j < n_kv (keys exist) and j < n_diag (causal: it starts at or left of the block's last
    # row); it needs no mask when j < full_kv (all its keys exist) and j < full_diag (causal: it ends at or left
    # of the block's first row). Two linear bounds rather than a min: the verifier relates them in both roles.
    n_kv = tp.cdiv(seq_k, BN)
    n_diag = tp.cdiv(m0 + BM, BN) if CAUSAL else n_kv
    full_kv = seq_k // BN
    full_diag = (m0 + 1) // BN if CAUSAL else full_kv
    q_s = tp.shared((BM, 64), tp.bf16, stages=DP * (2 if PAIRED else 1), swizzle=SW)
    k_s = tp.shared((BN, 64), tp.bf16, stages=STAGES * DP, swizzle=SW)
    v_s = tp.shared((BN, HEAD_DIM), tp.bf16, stages=STAGES, swizzle=SW, layout=v_layout(BN, HEAD_DIM))
    # Key tile j lives in stage j % STAGES; its round j // STAGES is the phase of both mbarriers.
    qbar = tp.mbarrier(1)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    vfull = tp.mbarrier(1, stages=STAGES)   # (PIPELINE) V_j landed; full[s] then covers K_j only
    tp.tag(Q, lambda b, i, d: ("Q", b, i, d))
    tp.tag(K, lambda b, j, d: ("K", b, j, d))
    tp.tag(V, lambda b, j, d: ("V", b, j, d))
    if PAIRED:
        # Row blocks mb_a = m_blocks - 1 - pb (the heavier when causal) and then mb_b = pb through one ring: ring
        # slot j < n_a is part a's key tile j, slot j >= n_a part b's key tile j - n_a (n_b = 0 where m_blocks is
        # odd and pb is the middle block: it runs alone). Both Q tiles are loaded up front, so part b's rows
        # never wait behind part a's, and part b's first K / V tiles stream in while part a finishes.
        mb_a = m_blocks - 1 - tp.block_id(0)
        mb_b = tp.block_id(0)
        n_a = tp.minimum(tp.cdiv(mb_a * BM + BM, BN), n_kv) if CAUSAL else n_kv
        n_b = tp.where(mb_b < mb_a, tp.minimum(tp.cdiv(mb_b * BM + BM, BN), n_kv) if CAUSAL else n_kv, 0)
    if PAIRED:
        if tp.warpgroup_id() == 0:
            if PRODUCER_REGS > 0:
                tp.setmaxnreg(PRODUCER_REGS)
            if mb_b <= mb_a:                # (blocks past cdiv(m_blocks, 2) have no rows)
                for part in tp.static_range(2):
                    pq0 = (mb_b if part else mb_a) * BM
                    for p in tp.static_range(DP):
                        tp.copy_bulk(Q[bh, pq0:pq0 + BM, p * 64:(p + 1) * 64], q_s[part * DP + p], qbar,
                                     fallback=FALLBACK)
                tp.mbarrier_arrive(qbar)
                for j in range(n_a + n_b):
                    if j >= STAGES:
                        tp.mbarrier_wait(empty[j % STAGES], j // STAGES - 1)   # slot j - STAGES was released
                    kt = tp.where(j < n_a, j, j - n_a)                          # the key tile of slot j
                    for p in tp.static_range(DP):
                        tp.copy_bulk(K[kvh, kt * BN:(kt + 1) * BN, p * 64:(p + 1) * 64], k_s[(j % STAGES) * DP + p],
                                     full[j % STAGES], fallback=FALLBACK)
                    tp.copy_bulk(V[kvh, kt * BN:(kt + 1) * BN, 0:HEAD_DIM], v_s[j % STAGES], full[j % STAGES],
                                 fallback=FALLBACK)
                    tp.mbarrier_arrive(full[j % STAGES])
        else:
            if CONSUMER_REGS > 0:
                tp.setmaxnreg(CONSUMER_REGS)
            if mb_b <= mb_a:                # (blocks past cdiv(m_blocks, 2) have no rows)
                tp.mbarrier_wait(qbar, 0)               # both Q tiles have landed
                o = tp.zeros((BM, HEAD_DIM), tp.f32, layout=ACC_O)
                m_i = tp.full((BM,), NEG, layout=ROWS)
                l_i = tp.zeros((BM,), tp.f32, layout=ROWS)
                for j in range(n_a + n_b):
                    qp = tp.where(j < n_a, 0, DP)                               # part b reads the second Q tile
                    kt = tp.where(j < n_a, j, j - n_a)
                    pm0 = tp.where(j < n_a, mb_a, mb_b) * BM
                    tp.mbarrier_wait(full[j % STAGES], j // STAGES)
                    sc = tp.zeros((BM, BN), tp.f32, layout=ACC_S)
                    for p in tp.static_range(DP):
                        sc = tp.mma(q_s[qp + p], k_s[(j % STAGES) * DP + p].T, sc)
                    tp.assert_tag(tp.mma_operands(sc), lambda a, b: a[3] == b[3] and a[1] // GROUP == b[1])
                    if kt >= full_kv or (CAUSAL and kt >= (pm0 + 1) // BN):     # the keys' end or the diagonal
                        cols = (kt * BN + tp.arange(BN))[None, :]
                        if CAUSAL:
                            kc = tp.zeros((BM, BN), tp.i32, layout=ACC_S) + cols
                            sc = sc + tp.where((kc < seq_k) & (kc <= (pm0 + tp.arange(BM, layout=ROWS))[:, None]),
                                               0.0, float("-inf"))
                        else:
                            sc = tp.where(cols < seq_k, sc, float("-inf"))
                    m_new = tp.maximum(m_i, tp.max(sc, axis=1) * scale_log2)
                    pr = tp.exp2(sc * scale_log2 - m_new[:, None])
                    alpha = tp.exp2(m_i - m_new)
                    l_i = l_i * alpha + tp.sum(pr, axis=1)
                    m_i = m_new
                    o = o * alpha[:, None]
                    p16 = pr.to(tp.bf16)
                    tp.tag(p16, lambda i, c: ("P", i, c))    # P[i, c] weighs key kt * BN + c
                    o = tp.mma(p16, v_s[j % STAGES], o)
                    tp.assert_tag(tp.mma_operands(o), lambda a, b: a[0] == "P" and b[0] == "V" and a[2] == b[2] % BN)
                    tp.mbarrier_arrive(empty[j % STAGES])
                    if j + 1 == n_a or j + 1 == n_a + n_b:                      # a part's last key tile: its epilogue
                        inv_l = 1.0 / l_i
                        tp.store(O[bh, pm0:pm0 + BM, 0:HEAD_DIM], o * inv_l[:, None])
                        tp.store(LSE[bh, pm0:pm0 + BM], (m_i + tp.log2(l_i)) * 0.6931471805599453)
                        o = tp.zeros((BM, HEAD_DIM), tp.f32, layout=ACC_O)
                        m_i = tp.full((BM,), NEG, layout=ROWS)
                        l_i = tp.zeros((BM,), tp.f32, layout=ROWS)
    else:
        if tp.warpgroup_id() == 0:        # producer warpgroup: one thread issues the bulk tensor copies
            if PRODUCER_REGS > 0:
                tp.setmaxnreg(PRODUCER_REGS)    # registers move to the consumers
            for p in tp.static_range(DP):
                tp.copy_bulk(Q[bh, m0:m0 + BM, p * 64:(p + 1) * 64], q_s[p], qbar, fallback=FALLBACK)
            tp.mbarrier_arrive(qbar)
            for j in range(n_diag):
                if j < n_kv:
                    if PIPELINE:
                        tp.mbarrier_wait(empty[j % STAGES], j // STAGES)       # (the consumers pre-release stages)
                    elif j >= STAGES:
                        tp.mbarrier_wait(empty[j % STAGES], j // STAGES - 1)   # tile j - STAGES was released
                    for p in tp.static_range(DP):
                        tp.copy_bulk(K[kvh, j * BN:(j + 1) * BN, p * 64:(p + 1) * 64], k_s[(j % STAGES) * DP + p],
                                     full[j % STAGES], fallback=FALLBACK)
                    if PIPELINE:                    # V on its own mbarrier: S_j need not wait for it
                        tp.mbarrier_arrive(full[j % STAGES])
                        tp.copy_bulk(V[kvh, j * BN:(j + 1) * BN, 0:HEAD_DIM], v_s[j % STAGES], vfull[j % STAGES],
                                     fallback=FALLBACK)
                        tp.mbarrier_arrive(vfull[j % STAGES])
                    else:
                        tp.copy_bulk(V[kvh, j * BN:(j + 1) * BN, 0:HEAD_DIM], v_s[j % STAGES], full[j % STAGES],
                                     fallback=FALLBACK)
                        tp.mbarrier_arrive(full[j % STAGES])
        else:                               # consumer warpgroups: 64 query rows each
            if CONSUMER_REGS > 0:
                tp.setmaxnreg(CONSUMER_REGS)
            o = tp.zeros((BM, HEAD_DIM), tp.f32, layout=ACC_O)
            m_i = tp.full((BM,), NEG, layout=ROWS)      # running row max (log2 units)
            l_i = tp.zeros((BM,), tp.f32, layout=ROWS)  # running row sum
            if PIPELINE:
                # FlashAttention-3's intra-warpgroup overlap. Iteration j issues S_j = Q K_j^T, then
                # O += P_{j-1} V_{j-1}, as asynchronous wgmma groups; waits for S_j only (wait_group 1) and computes
                # softmax(S_j) while the tensor cores run P_{j-1} V_{j-1}; retires that (wait_group 0), releases
                # tile j - 1's stage, rescales O. One iteration more issues the last tile's P V. V lands on its own
                # mbarrier (vfull) so that S_j never waits for V_j, and each tile's V is waited for at one place,
                # right before its P V. Stages
                # 0 .. STAGES - 2 are released up front and iteration 0 releases the last: the producer's wait for
                # tile j is phase j // STAGES of empty[j % STAGES] from the first round on. (ptxas keeps wgmma groups
                # asynchronous only where each group's issue and its wait lie on one path: S_j, P V and wait_group 1
                # share a branch.)
                # (The pre-release comes before the wait for Q, so that the producer's first K and V copies are not
                # held behind Q's round trip: at 4 key tiles a block, that latency is a large share.)
                for s in tp.static_range(STAGES - 1):
                    tp.mbarrier_arrive(empty[s])
                tp.mbarrier_wait(qbar, 0)               # Q has landed
                p16 = tp.zeros((BM, BN), tp.bf16, layout=ACC_S)
                for j in range(n_diag + 1):
                    if j > 0 and j - 1 < n_kv:
                        tp.mbarrier_wait(vfull[(j - 1) % STAGES], (j - 1) // STAGES)   # V_{j-1} has landed
                    if j < n_kv and j < n_diag:
                        tp.mbarrier_wait(full[j % STAGES], j // STAGES)        # K_j has landed
                        sc = tp.zeros((BM, BN), tp.f32, layout=ACC_S)
                        for p in tp.static_range(DP):
                            sc = tp.mma_async(q_s[p], k_s[(j % STAGES) * DP + p].T, sc)
                        if j > 0:
                            tp.tag(p16, lambda i, c: ("P", i, c))             # P[i, c] weighs key (j - 1) * BN + c
                            o = tp.mma_async(p16, v_s[(j - 1) % STAGES], o)
                            tp.mma_wait(1)                                     # S_j is done; P V runs on
                        else:
                            tp.mma_wait(0)
                        tp.assert_tag(tp.mma_operands(sc), lambda a, b: a[3] == b[3] and a[1] // GROUP == b[1])
                        if j >= full_kv or j >= full_diag:                     # the keys' end or the diagonal
                            cols = (j * BN + tp.arange(BN))[None, :]
                            if CAUSAL:
                                kc = tp.zeros((BM, BN), tp.i32, layout=ACC_S) + cols   # (BM, BN) in S's layout
                                sc = sc + tp.where((kc < seq_k) & (kc <= (m0 + tp.arange(BM, layout=ROWS))[:, None]),
                                                   0.0, float("-inf"))
                            else:
                                sc = tp.where(cols < seq_k, sc, float("-inf"))
                        m_new = tp.maximum(m_i, tp.max(sc, axis=1) * scale_log2)   # (scale > 0: the max commutes)
                        pr = tp.exp2(sc * scale_log2 - m_new[:, None])          # one FFMA and an ex2 per element
                        alpha = tp.exp2(m_i - m_new)
                        l_i = l_i * alpha + tp.sum(pr, axis=1)
                        m_i = m_new
                        tp.mma_wait(0)                                         # P_{j-1} V_{j-1} is done
                        if j > 0:                                              # (its pairs, before the rescale)
                            tp.assert_tag(tp.mma_operands(o),
                                          lambda a, b: a[0] == "P" and b[0] == "V" and a[2] == b[2] % BN)
                        tp.mbarrier_arrive(empty[(j + STAGES - 1) % STAGES])   # tile j - 1's stage
                        o = o * alpha[:, None]
                        p16 = pr.to(tp.bf16)
                    elif j > 0 and j - 1 < n_kv:                               # after the last tile: its P V
                        tp.tag(p16, lambda i, c: ("P", i, c))
                        o = tp.mma(p16, v_s[(j - 1) % STAGES], o)
                        tp.assert_tag(tp.mma_operands(o),
                                      lambda a, b: a[0] == "P" and b[0] == "V" and a[2] == b[2] % BN)
            else:
                # one tile at a time: S = Q K^T, softmax, O += P V, each wgmma waited for before the next step
                tp.mbarrier_wait(qbar, 0)               # Q has landed
                for j in range(n_diag):
                    if j < n_kv:
                        tp.mbarrier_wait(full[j % STAGES], j // STAGES)
                        sc = tp.zeros((BM, BN), tp.f32, layout=ACC_S)
                        for p in tp.static_range(DP):
                            sc = tp.mma(q_s[p], k_s[(j % STAGES) * DP + p].T, sc)
                        tp.assert_tag(tp.mma_operands(sc), lambda a, b: a[3] == b[3] and a[1] // GROUP == b[1])
                        if j >= full_kv or j >= full_diag:    # the keys' end or the diagonal crosses this tile
                            cols = (j * BN + tp.arange(BN))[None, :]
                            if CAUSAL:  # (sc first: the sum keeps the accumulator's layout, no registers move)
                                kc = tp.zeros((BM, BN), tp.i32, layout=ACC_S) + cols   # (BM, BN) in S's layout
                                sc = sc + tp.where((kc < seq_k) & (kc <= (m0 + tp.arange(BM, layout=ROWS))[:, None]),
                                                   0.0, float("-inf"))
                            else:
                                sc = tp.where(cols < seq_k, sc, float("-inf"))
                        m_new = tp.maximum(m_i, tp.max(sc, axis=1) * scale_log2)   # (scale > 0: the max commutes)
                        pr = tp.exp2(sc * scale_log2 - m_new[:, None])          # one FFMA and an ex2 per element
                        alpha = tp.exp2(m_i - m_new)
                        l_i = l_i * alpha + tp.sum(pr, axis=1)
                        m_i = m_new
                        o = o * alpha[:, None]
                        p16 = pr.to(tp.bf16)
                        tp.tag(p16, lambda i, c: ("P", i, c))    # P[i, c] weighs key j * BN + c
                        o = tp.mma(p16, v_s[j % STAGES], o)
                        tp.assert_tag(tp.mma_operands(o),
                                      lambda a, b: a[0] == "P" and b[0] == "V" and a[2] == b[2] % BN)
                        tp.mbarrier_arrive(empty[j % STAGES])
            inv_l = 1.0 / l_i                       # one division per row, a multiply per element
            tp.store(O[bh, m0:m0 + BM, 0:HEAD_DIM], o * inv_l[:, None])
            tp.store(LSE[bh, m0:m0 + BM], (m_i + tp.log2(l_i)) * 0.6931471805599453)


@tp.kernel(threads=_threads, target="sm_90a")
def attention_decode(Q: tp.Tensor[tp.bf16, "BHKV", "M", "D"], K: tp.Tensor[tp.bf16, "BHKV", "SKV", "D"],
                     V: tp.Tensor[tp.bf16, "BHKV", "SKV", "D"], OP: tp.Tensor[tp.f32, "NS", "BHKV", "M", "D"],
                     LP: tp.Tensor[tp.f32, "NS", "BHKV", "M"], scale_log2: tp.f32, chunk: tp.i32,
                     HEAD_DIM: tp.constexpr = 128, BN: tp.constexpr = 128, STAGES: tp.constexpr = 3,
                     CONSUMERS: tp.constexpr = 1, QLEN: tp.constexpr = 1, CAUSAL: tp.constexpr = False,
                     PRODUCER_REGS: tp.constexpr = 40, CONSUMER_REGS: tp.constexpr = 232,
                     FALLBACK: tp.constexpr = False):
    """One split of split-KV decoding: the queries of one KV head (its GROUP query heads x QLEN new tokens,
    packed as M = GROUP * QLEN rows: row r is query position r % QLEN) against keys [split * chunk, split *
    chunk + chunk) of the cache; writes the split's normalized output and log-sum-exp (natural log) for
    `attention_merge`. Causal: query position p sees keys up to SKV - QLEN + p (the new tokens are the
    cache's last QLEN). A split in which a row sees no key writes output 0 and log-sum-exp -inf."""
    BM = 64 * CONSUMERS
    DP = HEAD_DIM // 64
    SW = tp.Swizzle(3, 3, 3)
    ACC_S = tp.accumulator(s_instr(BN), (BM, BN), (CONSUMERS, 1))
    ACC_O = tp.accumulator(o_instr(HEAD_DIM), (BM, HEAD_DIM), (CONSUMERS, 1))
    split = tp.block_id(0)
    bh = tp.block_id(1)
    m0 = tp.block_id(2) * BM
    seq_k = K.shape[1]
    k0 = split * chunk                   # this split's keys: k0 .. k0 + chunk - 1 (chunk: a multiple of BN)
    t0 = k0 // BN
    n_kv = tp.cdiv(seq_k, BN)            # key tile j runs when t0 <= j < t0 + chunk / BN and j < n_kv
    t1 = t0 + chunk // BN
    full_kv = (seq_k - QLEN + 1) // BN if CAUSAL else seq_k // BN   # tiles every row sees whole
    q_s = tp.shared((BM, 64), tp.bf16, stages=DP, swizzle=SW)
    k_s = tp.shared((BN, 64), tp.bf16, stages=STAGES * DP, swizzle=SW)
    v_s = tp.shared((BN, HEAD_DIM), tp.bf16, stages=STAGES, swizzle=SW, layout=v_layout(BN, HEAD_DIM))
    qbar = tp.mbarrier(1)
    full0 = tp.mbarrier(1)
    full1 = tp.mbarrier(1)
    full2 = tp.mbarrier(1)
    full3 = tp.mbarrier(1)
    full4 = tp.mbarrier(1)
    full5 = tp.mbarrier(1)
    empty0 = tp.mbarrier(1)
    empty1 = tp.mbarrier(1)
    empty2 = tp.mbarrier(1)
    empty3 = tp.mbarrier(1)
    empty4 = tp.mbarrier(1)
    empty5 = tp.mbarrier(1)
    full = (full0, full1, full2, full3, full4, full5)       # (up to 6 stages)
    empty = (empty0, empty1, empty2, empty3, empty4, empty5)
    tp.tag(Q, lambda b, i, d: ("Q", b, i, d))
    tp.tag(K, lambda b, j, d: ("K", b, j, d))
    tp.tag(V, lambda b, j, d: ("V", b, j, d))
    rounds = tp.cdiv(chunk // BN, STAGES)
    if tp.warpgroup_id() == 0:
        tp.setmaxnreg(PRODUCER_REGS)
        for p in tp.static_range(DP):
            tp.copy_bulk(Q[bh, m0:m0 + BM, p * 64:(p + 1) * 64], q_s[p], qbar, fallback=FALLBACK)
        tp.mbarrier_arrive(qbar)
        for r in range(rounds):
            for s in tp.static_range(STAGES):
                j = t0 + r * STAGES + s
                if j < t1 and j < n_kv:
                    if r > 0:
                        tp.mbarrier_wait(empty[s], r - 1)
                    for p in tp.static_range(DP):
                        tp.copy_bulk(K[bh, j * BN:(j + 1) * BN, p * 64:(p + 1) * 64], k_s[s * DP + p], full[s],
                                     fallback=FALLBACK)
                    tp.copy_bulk(V[bh, j * BN:(j + 1) * BN, 0:HEAD_DIM], v_s[s], full[s], fallback=FALLBACK)
                    tp.mbarrier_arrive(full[s])
    else:
        tp.setmaxnreg(CONSUMER_REGS)
        o = tp.zeros((BM, HEAD_DIM), tp.f32, layout=ACC_O)
        m_i = tp.full((BM,), NEG, layout=row_layout(CONSUMERS))
        l_i = tp.zeros((BM,), tp.f32, layout=row_layout(CONSUMERS))
        for r in range(rounds):
            tp.mbarrier_wait(qbar, 0)
            for s in tp.static_range(STAGES):
                j = t0 + r * STAGES + s
                if j < t1 and j < n_kv:
                    tp.mbarrier_wait(full[s], r)
                    sc = tp.zeros((BM, BN), tp.f32, layout=ACC_S)
                    for p in tp.static_range(DP):
                        sc = tp.mma(q_s[p], k_s[s * DP + p].T, sc)
                    tp.assert_tag(tp.mma_operands(sc), lambda a, b: a[3] == b[3] and a[1] == b[1])
                    if j >= full_kv:
                        cols = (j * BN + tp.arange(BN))[None, :]
                        if CAUSAL:
                            sc = sc + tp.where(cols <= seq_k - QLEN + ((m0 + tp.arange(BM)) % QLEN)[:, None], 0.0,
                                               float("-inf"))
                        else:
                            sc = tp.where(cols < seq_k, sc, float("-inf"))
                    m_new = tp.maximum(m_i, tp.max(sc, axis=1) * scale_log2)   # (scale > 0: the max commutes)
                    pr = tp.exp2(sc * scale_log2 - m_new[:, None])          # one FFMA and an ex2 per element
                    alpha = tp.exp2(m_i - m_new)
                    l_i = l_i * alpha + tp.sum(pr, axis=1)
                    m_i = m_new
                    o = o * alpha[:, None]
                    p16 = pr.to(tp.bf16)
                    tp.tag(p16, lambda i, c: ("P", i, c))
                    o = tp.mma(p16, v_s[s], o)
                    tp.assert_tag(tp.mma_operands(o), lambda a, b: a[0] == "P" and b[0] == "V" and a[2] == b[2] % BN)
                    tp.mbarrier_arrive(empty[s])
        tp.store(OP[split, bh, m0:m0 + BM, 0:HEAD_DIM], o / tp.where(l_i > 0.0, l_i, 1.0)[:, None])
        tp.store(LP[split, bh, m0:m0 + BM], (m_i + tp.log2(l_i)) * 0.6931471805599453)


def _merge_layout(splits, br, d):
    """(splits, br, d) tile over 128 threads: threads along the head dim and the rows, the splits in each
    thread's values (the reductions over the splits stay in registers)."""
    return tp.blocked((splits, br, d), 128, vec=4)


def _merge_lse_layout(lay):
    """The (splits, br) LSE tile in the threads and values that hold its rows in `lay` (broadcast over d)."""
    return tp.TVLayout(lay.tile[:2], lay.thread_shape, lay.value_shape, lay.strides[:2], "rows")


@tp.kernel(threads=128, target="sm_90a")
def attention_merge(OP: tp.Tensor[tp.f32, "NS", "BHKV", "M", "D"], LP: tp.Tensor[tp.f32, "NS", "BHKV", "M"],
                    O: tp.Tensor[tp.bf16, "BHKV", "M", "D"], LSE: tp.Tensor[tp.f32, "BHKV", "M"],
                    HEAD_DIM: tp.constexpr = 128, BR: tp.constexpr = 16, SPLITS: tp.constexpr = 0):
    """O = sum_s exp(lse_s - lse) O_s with lse = log sum_s exp(lse_s): the splits' outputs weighed by their
    share of each row's softmax denominator (natural-log LSE in and out).
    SPLITS (a power of two >= NS, or 0): every split's partial output and LSE loaded as one (SPLITS, BR, D) tile
    before any arithmetic, so the block waits for one round trip to memory (splits past NS read as empty: LSE
    -inf, weight 0). With SPLITS = 0, run-time loops over the NS splits: each iteration's loads wait behind the
    previous one's arithmetic (instructions issue in order), two round trips per split (H100, 4 x 32768 decode,
    D 128, 4 splits: this merge took 6.9 us of the call's 186.4)."""
    bh = tp.block_id(0)
    r0 = tp.block_id(1) * BR
    lay = _merge_layout(max(SPLITS, 1), BR, HEAD_DIM)
    lw = _merge_lse_layout(lay)
    if SPLITS:
        op = tp.load(OP[0:SPLITS, bh, r0:r0 + BR, 0:HEAD_DIM], layout=lay)
        lp = tp.load(LP[0:SPLITS, bh, r0:r0 + BR], other=float("-inf"), layout=lw)[:, :, None]
        mx = tp.max(lp, axis=0, keepdims=True)
        mx = tp.where(mx == float("-inf"), 0.0, mx)     # rows past M (or all splits empty): nothing to weigh
        w = tp.exp(lp - mx)
        den = tp.sum(w, axis=0)                         # (BR, 1)
        acc = tp.sum(w * op, axis=0)                    # (BR, D)
        tp.store(O[bh, r0:r0 + BR, 0:HEAD_DIM], acc / tp.where(den > 0.0, den, 1.0))
        tp.store(LSE[bh, r0:r0 + BR], tp.sum(tp.sum(mx, axis=0) + tp.log(den), axis=1))   # (1, BR, 1) -> (BR,)
    else:
        ns = OP.shape[0]
        mx = tp.full((BR,), float("-inf"))
        for s in range(ns):
            mx = tp.maximum(mx, tp.load(LP[s, bh, r0:r0 + BR], other=float("-inf")))
        mx = tp.where(mx == float("-inf"), 0.0, mx)     # rows past M: nothing to weigh
        den = tp.zeros((BR,))
        acc = tp.zeros((BR, HEAD_DIM))
        for s in range(ns):
            w = tp.exp(tp.load(LP[s, bh, r0:r0 + BR], other=float("-inf")) - mx)
            den = den + w
            acc = acc + w[:, None] * tp.load(OP[s, bh, r0:r0 + BR, 0:HEAD_DIM])
        tp.store(O[bh, r0:r0 + BR, 0:HEAD_DIM], acc / tp.where(den > 0.0, den, 1.0)[:, None])
        tp.store(LSE[bh, r0:r0 + BR], mx + tp.log(den))


def merge_params(splits: int, rows: int, d: int) -> dict:
    """attention_merge's constexprs for `splits` partials of `rows` rows: every split loaded at once (SPLITS) up
    to 8 splits, BR rows a block such that the 128 threads lie along the rows and the head dim (BR >= 512 / d)
    and a thread holds at most 64 values; more splits: the run-time loops, 16 rows a block."""
    if splits > 8:
        return dict(HEAD_DIM=d, BR=16, SPLITS=0)
    s2 = 1 << (splits - 1).bit_length()
    br = max(512 // d, min(16, 1 << (max(rows, 1) - 1).bit_length()))
    while s2 * br * d > 64 * 128 and br > 512 // d:
        br //= 2
    return dict(HEAD_DIM=d, BR=br, SPLITS=s2)


PRESETS = {
    64: dict(HEAD_DIM=64, BN=128, STAGES=4, CONSUMERS=2),
    128: dict(HEAD_DIM=128, BN=128, STAGES=3, CONSUMERS=2),
}
# The policy per shape class and mask (`policy(d, sq, causal)` picks one; constexprs over PRESETS[d]; `launch`
# uses it). Three consumer warpgroups (BM = 192) share each K / V tile among more query rows and run one
# warpgroup's softmax beside another's wgmma; their register budget (160 each, producer 24: 64K in all) has
# no room for the pipelined loop's live S_j + P_{j-1} + O (it spills), so they run one tile at a time. Short
# sequences (4 key tiles a block) do best one tile at a time as well, two row blocks a block (PAIRED: half the
# blocks, each one's start, first round trips and epilogue paid once for two row blocks; at d = 128 two Q tiles
# and 3 K / V stages exceed a block's shared memory: 2 stages). Chosen from
# `benchmarks/attention.py --sweep` on the H100 (benchmarks/NOTES.md, results/attention-sweep-*.json).
THREE_CONSUMERS = dict(CONSUMERS=3, PRODUCER_REGS=24, CONSUMER_REGS=160, PIPELINE=False)
ONE_TILE = dict(PIPELINE=False)
PAIRED = dict(PAIRED=True, PIPELINE=False)
POLICIES = {  # (head dim, shape class, causal); figures: H100, 512 rows, vs flash in the same run
    (64, "short", False): {**THREE_CONSUMERS, **PAIRED},   # 1.13x (unpaired 1.06, C2 paired 1.05, preset 0.95)
    (64, "short", True): PAIRED,             # 1.11x (one tile unpaired 0.99, the preset 0.98, C3 paired 0.98)
    (64, "long", False): THREE_CONSUMERS,    # 1.55-1.59x (the preset 1.20-1.23)
    (64, "long", True): THREE_CONSUMERS,     # 1.35-1.49x (the preset 1.24-1.36)
    (128, "short", False): {**PAIRED, "STAGES": 2},   # 1.22x (the preset 1.22, one tile unpaired 1.19)
    (128, "short", True): {**PAIRED, "STAGES": 2},    # 1.21x (the preset 1.15, one tile unpaired 1.18)
    (128, "long", False): {},
    (128, "long", True): {},
}
# attention_decode's ring per head dim (4 stages of 128-key K and V tiles at d = 128 are 278 KB, over a block's
# shared memory: 3 fit)
DECODE_STAGES = {64: 4, 128: 3}


def decode_ring(d: int, rows: int, skv: int, splits: int) -> tuple[int, int]:
    """(BN, STAGES) of `attention_decode`: at d = 64 with one consumer warpgroup, tiles of 256 keys in 2 stages
    where the cache has a 256-key tile for every split (H100, 8 x 16384, 2 splits: K/V read at 2.78 TB/s against
    2.75 for 128-key tiles in 4 stages, flash 2.77: results/attention-decode-d64-bn256-*.json); else 128-key
    tiles in DECODE_STAGES[d] stages."""
    if d == 64 and rows <= 64 and -(-skv // 256) >= splits:
        return 256, 2
    return 128, DECODE_STAGES[d]


def shape_class(sq: int) -> str:
    """'short' (<= 1024 query rows: a few key tiles per block, the prologue and epilogue weigh) or 'long'."""
    return "short" if sq <= 1024 else "long"


def policy(d: int, sq: int, causal: bool = False) -> dict:
    """The constexprs for head dim d and sq query rows: PRESETS[d] with its shape class's policy."""
    if d not in PRESETS:
        raise ValueError(f"head dim {d} is not supported (64 or 128)")
    return {**PRESETS[d], **POLICIES[(d, shape_class(sq), bool(causal))], "CAUSAL": bool(causal)}


def needs_fallback(*tensors) -> bool:
    """Whether a GPU tensor among `tensors` cannot be described by a tensor map (not contiguous, or a base
    address off 16 bytes), so the kernel must be built with the per-row / per-element copy path
    (FALLBACK=True). Without it (the default) the producer holds only the TMA copies: no fallback code, no
    spills under its small register budget; the launch refuses such a tensor with a clear error."""
    for t in tensors:
        if hasattr(t, "data_ptr") and (not t.is_contiguous() or t.data_ptr() % 16):
            return True
    return False


def launch(q, k, v, o, lse, causal=False, scale=None, **constexprs):
    """o, lse = attention(q, k, v): q, o (BH, SQ, D), k, v (BHKV, SKV, D) with BH a multiple of BHKV. The
    constexprs are `policy(d, sq, causal)`; given any, they are PRESETS[d] with those instead."""
    bh, sq, d = q.shape
    bhkv = k.shape[0]
    if bh % bhkv:
        raise ValueError(f"query heads ({bh}) must be a multiple of KV heads ({bhkv})")
    if d not in PRESETS:
        raise ValueError(f"head dim {d} is not supported (64 or 128)")
    base = {**PRESETS[d], "CAUSAL": bool(causal)} if constexprs else policy(d, sq, causal)
    params = {"FALLBACK": needs_fallback(q, k, v), **base, "GROUP": bh // bhkv, **constexprs}
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    if params.get("PAIRED") and params.get("PIPELINE", True):
        raise ValueError("attention: PAIRED runs one key tile at a time: pass PIPELINE=False with it")
    grid = (tp.cdiv(tp.cdiv(sq, 64 * params["CONSUMERS"]), 2 if params.get("PAIRED") else 1), bh)
    return attention_fwd[grid](q, k, v, o, lse, scale * math.log2(math.e), **params)


def reference(q, k, v, causal=False, scale=None):
    """(out, lse) in float64: q (BH, SQ, D), k, v (BHKV, SKV, D)."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    g = q.shape[0] // k.shape[0]
    k, v = np.repeat(k, g, axis=0), np.repeat(v, g, axis=0)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(0, 2, 1) * scale
    if causal:
        i, j = np.indices(s.shape[1:])
        s = np.where(j <= i, s, -np.inf)
    mx = s.max(axis=-1, keepdims=True)
    e = np.exp(s - mx)
    den = e.sum(axis=-1, keepdims=True)
    return e @ v / den, (mx + np.log(den))[..., 0]


def decode_splits(bhkv: int, rows: int, skv: int, d: int, num_sms: int = 132, bn: int = 128) -> int:
    """The default split count of `decode`: one wave. A block of `attention_decode` holds its ring of
    DECODE_STAGES K / V stages (136 KB at d = 64, 208 KB at d = 128), so one block runs per SM; the keys are cut
    into as many splits as fill the SMs once (bhkv * row blocks * splits <= num_sms), each SM streaming one
    contiguous chunk from start to end. More splits than that run in waves, each paying its ring's fill and
    drain (and the uneven last wave); fewer leave SMs idle. Where the heads alone fill the SMs: 1 (no merge)."""
    m_blocks = -(-rows // (64 * (1 if rows <= 64 else 2)))
    tiles = -(-skv // bn)
    return max(1, min(tiles, num_sms // (bhkv * m_blocks)))


# attention_decode storing its one split's output straight into a bf16 O (splits == 1: no merge to run)
attention_decode_bf16 = attention_decode.retyped(OP=tp.Tensor[tp.bf16, "NS", "BHKV", "M", "D"])


def decode(q, k, v, o, lse, causal=False, scale=None, splits=None, num_sms=132, **constexprs):
    """Split-KV decoding: o, lse = attention(q, k, v) for q, o (B * H, QLEN, D) with QLEN <= 16 new tokens
    against k, v (B * HKV, SKV, D), H = GROUP * HKV. The GROUP query heads of a KV head share its blocks (their
    QLEN rows each are packed into one tile of GROUP * QLEN rows); the keys are cut into `splits` chunks
    (default `decode_splits`: one wave of `num_sms` blocks), each split writes its output and log-sum-exp in
    float32, and `attention_merge` combines them. With one split the kernel writes o and lse itself (no
    partials, no merge). Returns the partials (o_parts, lse_parts) (with one split: views of o and lse)."""
    bh, qlen, d = q.shape
    bhkv, skv, _ = k.shape
    if bh % bhkv:
        raise ValueError(f"query heads ({bh}) must be a multiple of KV heads ({bhkv})")
    if d not in PRESETS:
        raise ValueError(f"head dim {d} is not supported (64 or 128)")
    if qlen > 16:
        raise ValueError(f"decode takes up to 16 new tokens per sequence, not {qlen}: use launch()")
    for name, t in (("o", o), ("lse", lse)):   # written through a (bhkv, rows, ...) view: a copy would be lost
        if not (t.is_contiguous() if hasattr(t, "is_contiguous") else t.flags.c_contiguous):
            raise ValueError(f"decode writes `{name}` in place through a reshaped view, so it must be contiguous: "
                             f"pass a contiguous tensor (e.g. torch.empty of its shape) and copy it where needed")
    group = bh // bhkv
    rows = group * qlen
    qp = q.reshape(bhkv, rows, d)         # (b, kv head, group, qlen) rows: the heads of a KV head are adjacent
    bn, stages = decode_ring(d, rows, skv, splits or decode_splits(bhkv, rows, skv, d, num_sms))
    params = {**dict(HEAD_DIM=d, BN=bn, STAGES=stages, CONSUMERS=1 if rows <= 64 else 2, QLEN=qlen,
                     CAUSAL=bool(causal), FALLBACK=needs_fallback(qp, k, v)), **constexprs}
    bn = params["BN"]
    tiles = tp.cdiv(skv, bn)
    m_blocks = tp.cdiv(rows, 64 * params["CONSUMERS"])
    if splits is None:
        splits = decode_splits(bhkv, rows, skv, d, num_sms, bn)
    chunk = tp.cdiv(tiles, splits) * bn
    splits = tp.cdiv(skv, chunk)          # every split holds at least one key
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    o_view = o.reshape(bhkv, rows, d)
    lse_view = lse.reshape(bhkv, rows)
    grid = (splits, bhkv, m_blocks)
    if splits == 1:                       # the one split's normalized output and LSE are the result
        o_parts, lse_parts = o_view.reshape(1, bhkv, rows, d), lse_view.reshape(1, bhkv, rows)
        bf16 = str(getattr(o, "dtype", "")).endswith("bfloat16")
        kernel = attention_decode_bf16 if bf16 else attention_decode
        kernel[grid](qp, k, v, o_parts, lse_parts, scale * math.log2(math.e), chunk, **params)
        return o_parts, lse_parts
    op_shape, lp_shape = (splits, bhkv, rows, d), (splits, bhkv, rows)
    if hasattr(q, "new_empty"):           # torch
        import torch

        o_parts = torch.empty(op_shape, device=q.device, dtype=torch.float32)
        lse_parts = torch.empty(lp_shape, device=q.device, dtype=torch.float32)
    else:
        o_parts = np.full(op_shape, np.nan, np.float32)
        lse_parts = np.full(lp_shape, np.nan, np.float32)
    attention_decode[grid](qp, k, v, o_parts, lse_parts, scale * math.log2(math.e), chunk, **params)
    mp = merge_params(splits, rows, d)
    attention_merge[(bhkv, tp.cdiv(rows, mp["BR"]))](o_parts, lse_parts, o_view, lse_view, **mp)
    return o_parts, lse_parts


def reference_decode(q, k, v, causal=False, scale=None):
    """float64 (out, lse) of QLEN new tokens that are the cache's last QLEN positions (bottom-right causal)."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    g = q.shape[0] // k.shape[0]
    k, v = np.repeat(k, g, axis=0), np.repeat(v, g, axis=0)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(0, 2, 1) * scale
    if causal:
        qlen, skv = s.shape[1:]
        i, j = np.indices((qlen, skv))
        s = np.where(j <= skv - qlen + i, s, -np.inf)
    mx = s.max(axis=-1, keepdims=True)
    e = np.exp(s - mx)
    den = e.sum(axis=-1, keepdims=True)
    return e @ v / den, (mx + np.log(den))[..., 0]
