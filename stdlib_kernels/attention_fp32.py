"""Forward attention O = softmax(Q K^T * scale) V in float32 at float32 accuracy on Hopper (sm_90a): both
products on the tensor cores as split TF32 (three TF32 products, as `gemm_fp32.py`), online softmax, no
SQ x SKV matrix in memory, causal block skipping, grouped-query attention, head dims 32, 64 and 128.

Tensors are flattened over (batch, head) as in `attention.py`: Q, O (B * H, SQ, D), K, V (B * HKV, SKV, D),
H = GROUP * HKV (query head bh reads KV head bh // GROUP); LSE (B * H, SQ) gets each row's natural-log sum of
exponentials. Causal masking is torch's `is_causal` (top-left: key j is visible to query i when j <= i).

Precision. Every f32 operand x is split into a TF32 head and tail, hi = round_tf32(x), lo = round_tf32(x - hi)
(21 of float32's 24 significand bits), and each product keeps the three terms that matter, smallest first:

    S  = Q_lo K_hi^T + Q_hi K_lo^T + Q_hi K_hi^T          (wgmma m64nBNk8 .tf32, over the head dim)
    O += P_lo V_hi + P_hi V_lo + P_hi V_hi                 (wgmma m64nDk8 .tf32, over the tile's keys)

Each key tile's P V goes into a fresh accumulator that is added to the rescaled running output with f32 adds
(the long sum over the keys is rounded as ordinary f32 arithmetic rounds it, not in the tensor cores' chain).
The softmax runs in f32 registers (exp2 with the scale folded in, running max and sum per row).

Two passes. `gemm_fp32.split` writes Q and K's halves as they lie (K-major for S: the head dim is
contiguous) and V's halves transposed, (B * HKV, D, SKVP) with SKVP = SKV rounded up to 4 (zeros past SKV):
wgmma reads TF32 operands K-major only, and P V runs over the keys. Then `attention_fp32`, warp-specialized as
`attention.py`: warpgroup 0 loads the Q halves once and streams the K and V^T halves of BN keys into a ring of
STAGES stages with bulk tensor copies (TMA, `full[s]`); warpgroups 1..CONSUMERS own 64 query rows each: S on
wgmma from shared memory, the online softmax in registers, P split and stored into a shared tile (wgmma has no
TF32 A operand in registers that an accumulator maps onto), a barrier over the consumers, P V, the stage
released (`empty[s]`). Causal blocks stop at the diagonal (keys past the block's last row are never loaded) and
the longest row blocks start first; only tiles that cross the diagonal or the keys' end pay for the mask.

Every 32-column piece of a tile is one 128-byte swizzle atom of f32 (wgmma's K-major operand form): the head dim
is cut into D // 32 pieces, and BN = 32 keys a tile (P and V^T are one piece wide).

Invariants stated as tags and checked by tilepy-verify: every S product pairs a query and a key element of the
same head-dim index, the query head reading its own KV head; every P V product pairs a key column of P with the
same key of V^T.
"""

import math

import numpy as np

import tilepy as tp

HEAD_DIMS = (32, 64, 128)
NEG = -1.0e30  # the running max before any key: finite, so exp2(NEG - m) is 0, never NaN


def _threads(c):
    return 128 * (1 + c["CONSUMERS"])


def row_layout(consumers):
    """The rows of a (64 * consumers, N) wgmma accumulator, one value per row a thread holds (as attention.py's):
    the running max and sum."""
    return tp.TVLayout((64 * consumers,), (4, 8, 4, consumers, 1), (2,), (((0, 1, 16, 64, 0), (8,)),), "wgmma.rows")


# The instructions by tile width, named directly (a candidate module may not reach attributes by string: the
# agent's policy refuses getattr)
_TF32_INSTR = {8: tp.nv.wgmma_m64n8k8_tf32, 16: tp.nv.wgmma_m64n16k8_tf32, 32: tp.nv.wgmma_m64n32k8_tf32,
               64: tp.nv.wgmma_m64n64k8_tf32, 128: tp.nv.wgmma_m64n128k8_tf32, 256: tp.nv.wgmma_m64n256k8_tf32}


def s_instr(BN):
    return _TF32_INSTR[BN]


def o_instr(D):
    return _TF32_INSTR[D]


@tp.kernel(threads=_threads, target="sm_90a")
def attention_fp32(QH: tp.Tensor[tp.f32, "BH", "SQ", "D"], QL: tp.Tensor[tp.f32, "BH", "SQ", "D"],
                   KH: tp.Tensor[tp.f32, "BHKV", "SKV", "D"], KL: tp.Tensor[tp.f32, "BHKV", "SKV", "D"],
                   VH: tp.Tensor[tp.f32, "BHKV", "D", "SKVP"], VL: tp.Tensor[tp.f32, "BHKV", "D", "SKVP"],
                   O: tp.Tensor[tp.f32, "BH", "SQ", "D"], LSE: tp.Tensor[tp.f32, "BH", "SQ"], scale_log2: tp.f32,
                   HEAD_DIM: tp.constexpr = 64, BN: tp.constexpr = 32, STAGES: tp.constexpr = 3,
                   CONSUMERS: tp.constexpr = 2, CAUSAL: tp.constexpr = False, GROUP: tp.constexpr = 1,
                   PBUF: tp.constexpr = 2, PROMOTE: tp.constexpr = False, PRODUCER_REGS: tp.constexpr = 24,
                   CONSUMER_REGS: tp.constexpr = 240, LOLO: tp.constexpr = False, PV_LOLO: tp.constexpr = False,
                   PIECES: tp.constexpr = False):
    """LOLO / PV_LOLO (opt-in, for the error study): also the fourth, smallest term of S (Q_lo K_lo^T) / of
    P V (P_lo V_lo), first in its chain: the split's dropped term, 2^-22 of the operands' product.
    PIECES (opt-in, not yet run on the device): S's products of each 32-column piece of the head dim in a chain
    of their own (at most 12 k8 steps accumulated by the tensor cores), the pieces added in f32 registers: the
    candidate fix for d 128's largest error (docs/kernels.md, "Why the d 128 xfails stay")."""
    BM = 64 * CONSUMERS
    DP = HEAD_DIM // 32                 # 32-column pieces of the head dimension (one swizzle atom of f32)
    SW = tp.Swizzle(3, 2, 3)
    ACC_S = tp.accumulator(s_instr(BN), (BM, BN), (CONSUMERS, 1))
    ACC_O = tp.accumulator(o_instr(HEAD_DIM), (BM, HEAD_DIM), (CONSUMERS, 1))
    ROWS = row_layout(CONSUMERS)
    bh = tp.block_id(1)
    kvh = bh // GROUP
    seq_q = QH.shape[1]
    seq_k = KH.shape[1]
    m_blocks = tp.cdiv(seq_q, BM)
    mb = m_blocks - 1 - tp.block_id(0) if CAUSAL else tp.block_id(0)   # causal: the longest rows first
    m0 = mb * BM
    # Key tile j runs when j < n_kv (keys exist) and j < n_diag (causal: it starts at or left of the block's last
    # row); it needs no mask when j < full_kv and j < full_diag (it ends at or left of the block's first row).
    n_kv = tp.cdiv(seq_k, BN)
    n_diag = tp.cdiv(m0 + BM, BN) if CAUSAL else n_kv
    full_kv = seq_k // BN
    full_diag = (m0 + 1) // BN if CAUSAL else full_kv
    q_hi = tp.shared((BM, 32), tp.f32, stages=DP, swizzle=SW)
    q_lo = tp.shared((BM, 32), tp.f32, stages=DP, swizzle=SW)
    k_hi = tp.shared((BN, 32), tp.f32, stages=STAGES * DP, swizzle=SW)     # K-major: the (keys, head dim) tile
    k_lo = tp.shared((BN, 32), tp.f32, stages=STAGES * DP, swizzle=SW)
    v_hi = tp.shared((HEAD_DIM, BN), tp.f32, stages=STAGES, swizzle=SW)    # K-major: the (head dim, keys) tile
    v_lo = tp.shared((HEAD_DIM, BN), tp.f32, stages=STAGES, swizzle=SW)
    p_hi = tp.shared((BM, BN), tp.f32, stages=PBUF, swizzle=SW)             # K-major: the (rows, keys) tile
    p_lo = tp.shared((BM, BN), tp.f32, stages=PBUF, swizzle=SW)
    # Key tile j lives in stage j % STAGES; its round j // STAGES is the phase of both ring mbarriers.
    qbar = tp.mbarrier(1)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    pbar = tp.mbarrier(1)               # the consumers' P of tile j is in shared memory (phase j)
    fbar = tp.mbarrier(1)               # (PBUF 1) the P V of tile j - 1 is done: P may be written (phase j)
    tp.tag(QH, lambda b, i, d: ("Q", b, i, d))
    tp.tag(QL, lambda b, i, d: ("Q", b, i, d))
    tp.tag(KH, lambda b, j, d: ("K", b, j, d))
    tp.tag(KL, lambda b, j, d: ("K", b, j, d))
    tp.tag(VH, lambda b, d, j: ("V", b, j, d))
    tp.tag(VL, lambda b, d, j: ("V", b, j, d))
    if tp.warpgroup_id() == 0:          # producer warpgroup: one thread issues the bulk tensor copies
        if PRODUCER_REGS > 0:
            tp.setmaxnreg(PRODUCER_REGS)    # registers move to the consumers
        for p in tp.static_range(DP):
            tp.copy_bulk(QH[bh, m0:m0 + BM, p * 32:(p + 1) * 32], q_hi[p], qbar, fallback=False)
            tp.copy_bulk(QL[bh, m0:m0 + BM, p * 32:(p + 1) * 32], q_lo[p], qbar, fallback=False)
        tp.mbarrier_arrive(qbar)
        for j in range(n_diag):
            if j < n_kv:
                if j >= STAGES:
                    tp.mbarrier_wait(empty[j % STAGES], j // STAGES - 1)   # tile j - STAGES was released
                for p in tp.static_range(DP):
                    tp.copy_bulk(KH[kvh, j * BN:(j + 1) * BN, p * 32:(p + 1) * 32], k_hi[(j % STAGES) * DP + p],
                                 full[j % STAGES], fallback=False)
                    tp.copy_bulk(KL[kvh, j * BN:(j + 1) * BN, p * 32:(p + 1) * 32], k_lo[(j % STAGES) * DP + p],
                                 full[j % STAGES], fallback=False)
                tp.copy_bulk(VH[kvh, 0:HEAD_DIM, j * BN:(j + 1) * BN], v_hi[j % STAGES], full[j % STAGES],
                             fallback=False)
                tp.copy_bulk(VL[kvh, 0:HEAD_DIM, j * BN:(j + 1) * BN], v_lo[j % STAGES], full[j % STAGES],
                             fallback=False)
                tp.mbarrier_arrive(full[j % STAGES])
    else:                               # consumer warpgroups: 64 query rows each
        if CONSUMER_REGS > 0:
            tp.setmaxnreg(CONSUMER_REGS)
        o = tp.zeros((BM, HEAD_DIM), tp.f32, layout=ACC_O)
        m_i = tp.full((BM,), NEG, layout=ROWS)      # running row max (log2 units)
        l_i = tp.zeros((BM,), tp.f32, layout=ROWS)  # running row sum
        tp.mbarrier_wait(qbar, 0)                   # Q has landed
        for j in range(n_diag):
            if j < n_kv:
                tp.mbarrier_wait(full[j % STAGES], j // STAGES)
                sc = tp.zeros((BM, BN), tp.f32, layout=ACC_S)
                if PIECES:      # each 32-column piece of the head dim in a fresh chain, the pieces summed by FADD
                    for p in tp.static_range(DP):
                        sp = tp.zeros((BM, BN), tp.f32, layout=ACC_S)
                        if LOLO:
                            sp = tp.mma(q_lo[p], k_lo[(j % STAGES) * DP + p].T, sp)
                        sp = tp.mma(q_lo[p], k_hi[(j % STAGES) * DP + p].T, sp)
                        sp = tp.mma(q_hi[p], k_lo[(j % STAGES) * DP + p].T, sp)
                        sp = tp.mma(q_hi[p], k_hi[(j % STAGES) * DP + p].T, sp)
                        tp.assert_tag(tp.mma_operands(sp), lambda a, b: a[3] == b[3] and a[1] // GROUP == b[1])
                        sc = sc + sp
                elif LOLO:
                    for p in tp.static_range(DP):
                        sc = tp.mma(q_lo[p], k_lo[(j % STAGES) * DP + p].T, sc)
                for p in tp.static_range(0 if PIECES else DP):      # the small terms first
                    sc = tp.mma(q_lo[p], k_hi[(j % STAGES) * DP + p].T, sc)
                    sc = tp.mma(q_hi[p], k_lo[(j % STAGES) * DP + p].T, sc)
                if PIECES:
                    pass        # every product, head terms included, is in the pieces summed above
                elif PROMOTE:   # the head terms in a chain of their own, added to the tails' with an f32 add
                    tp.assert_tag(tp.mma_operands(sc), lambda a, b: a[3] == b[3] and a[1] // GROUP == b[1])
                    sh = tp.zeros((BM, BN), tp.f32, layout=ACC_S)
                    for p in tp.static_range(DP):
                        sh = tp.mma(q_hi[p], k_hi[(j % STAGES) * DP + p].T, sh)
                    tp.assert_tag(tp.mma_operands(sh), lambda a, b: a[3] == b[3] and a[1] // GROUP == b[1])
                    sc = sc + sh
                else:
                    for p in tp.static_range(DP):
                        sc = tp.mma(q_hi[p], k_hi[(j % STAGES) * DP + p].T, sc)
                    tp.assert_tag(tp.mma_operands(sc), lambda a, b: a[3] == b[3] and a[1] // GROUP == b[1])
                if j >= full_kv or j >= full_diag:      # the keys' end or the diagonal crosses this tile
                    cols = (j * BN + tp.arange(BN))[None, :]
                    if CAUSAL:  # (sc first: the sum keeps the accumulator's layout, no registers move)
                        kc = tp.zeros((BM, BN), tp.i32, layout=ACC_S) + cols
                        sc = sc + tp.where((kc < seq_k) & (kc <= (m0 + tp.arange(BM, layout=ROWS))[:, None]),
                                           0.0, float("-inf"))
                    else:
                        sc = tp.where(cols < seq_k, sc, float("-inf"))
                m_new = tp.maximum(m_i, tp.max(sc, axis=1) * scale_log2)   # (scale > 0: the max commutes)
                pr = tp.exp2(sc * scale_log2 - m_new[:, None])
                alpha = tp.exp2(m_i - m_new)
                l_i = l_i * alpha + tp.sum(pr, axis=1)
                m_i = m_new
                ph = tp.round_tf32(pr)
                tp.tag(ph, lambda i, c: ("P", i, c))       # P[i, c] weighs key j * BN + c
                pl = tp.round_tf32(pr - ph)
                tp.tag(pl, lambda i, c: ("P", i, c))
                if PBUF == 1:       # P V of tile j - 1 read the one buffer: every consumer is past it
                    tp.mbarrier_arrive(fbar)
                    tp.mbarrier_wait(fbar, j)
                # (PBUF 2: tile j - 2's P V, the last reader of this buffer, came before tile j - 1's pbar wait)
                tp.store(p_hi[j % PBUF], ph)
                tp.store(p_lo[j % PBUF], pl)
                tp.mbarrier_arrive(pbar)                   # (a barrier over the consumers, then one arrival)
                tp.mbarrier_wait(pbar, j)                  # every row of P is in shared memory
                part = tp.zeros((BM, HEAD_DIM), tp.f32, layout=ACC_O)
                if PV_LOLO:
                    part = tp.mma(p_lo[j % PBUF], v_lo[j % STAGES].T, part)
                part = tp.mma(p_lo[j % PBUF], v_hi[j % STAGES].T, part)
                part = tp.mma(p_hi[j % PBUF], v_lo[j % STAGES].T, part)
                if PROMOTE:
                    tp.assert_tag(tp.mma_operands(part),
                                  lambda a, b: a[0] == "P" and b[0] == "V" and a[2] == b[2] % BN)
                    ph_v = tp.zeros((BM, HEAD_DIM), tp.f32, layout=ACC_O)
                    ph_v = tp.mma(p_hi[j % PBUF], v_hi[j % STAGES].T, ph_v)
                    tp.assert_tag(tp.mma_operands(ph_v),
                                  lambda a, b: a[0] == "P" and b[0] == "V" and a[2] == b[2] % BN)
                    part = part + ph_v
                else:
                    part = tp.mma(p_hi[j % PBUF], v_hi[j % STAGES].T, part)
                    tp.assert_tag(tp.mma_operands(part),
                                  lambda a, b: a[0] == "P" and b[0] == "V" and a[2] == b[2] % BN)
                tp.mbarrier_arrive(empty[j % STAGES])
                o = o * alpha[:, None] + part              # round-to-nearest f32 adds across key tiles
        tp.store(O[bh, m0:m0 + BM, 0:HEAD_DIM], o / l_i[:, None])   # (a division: one rounding, not two)
        tp.store(LSE[bh, m0:m0 + BM], (m_i + tp.log2(l_i)) * 0.6931471805599453)


# Per head dim: shared memory is the Q halves (BM x D x 8 bytes), STAGES stages of the K and V^T halves
# (BN x D x 16 bytes each) and the P halves (PBUF x BM x BN x 8); 227 KB a block at most. H100, d 64
# (benchmarks/attention_fp32.py --sweep, 8 x 16 x 1024-2048): the preset 1.74-1.80x eager; 3 stages with one P
# buffer 1.69-1.77x; one consumer warpgroup (BM 64) 1.27-1.38x. d 32 and d 128 follow d 64's form (unmeasured
# alternatives; d 32 keeps 2 stages, which tilepy-verify proves in half the time of 4).
PRESETS = {
    32: dict(HEAD_DIM=32, BN=32, STAGES=2, CONSUMERS=2, PBUF=2),      # 32 + 32 + 64 KB
    64: dict(HEAD_DIM=64, BN=32, STAGES=2, CONSUMERS=2, PBUF=2),      # 64 + 64 + 64 KB
    128: dict(HEAD_DIM=128, BN=32, STAGES=2, CONSUMERS=1, PBUF=2),    # 64 + 128 + 32 KB (BM 128 would not fit)
}


def policy(d: int, sq: int = 0, causal: bool = False) -> dict:
    """The constexprs for head dim d: PRESETS[d] with the mask."""
    if d not in PRESETS:
        raise ValueError(f"head dim {d} is not supported by the fp32 attention kernel (32, 64 or 128)")
    return {**PRESETS[d], "CAUSAL": bool(causal)}


def smem_bytes(HEAD_DIM: int, BN: int = 32, STAGES: int = 3, CONSUMERS: int = 2, PBUF: int = 2, **_) -> int:
    """The kernel's shared tiles in bytes (mbarriers aside)."""
    bm = 64 * CONSUMERS
    return 8 * (bm * HEAD_DIM + STAGES * 2 * BN * HEAD_DIM + PBUF * bm * BN)


def check(q, k, v, o, lse) -> None:
    """ValueError naming what is wrong with the operands of `launch`."""
    if len(q.shape) != 3 or len(k.shape) != 3 or len(v.shape) != 3:
        raise ValueError(f"q, k, v must be (BH, S, D) tensors, not {tuple(q.shape)}, {tuple(k.shape)}, "
                         f"{tuple(v.shape)}: flatten batch and heads first")
    bh, sq, d = q.shape
    bhkv, skv, dk = k.shape
    if d not in HEAD_DIMS:
        raise ValueError(f"head dim {d} is not supported by the fp32 attention kernel (32, 64 or 128): use "
                         "torch's decomposition (bmm, softmax, bmm) for it")
    if dk != d or tuple(v.shape) != tuple(k.shape):
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must both be (BHKV, SKV, {d})")
    if bhkv == 0 or bh % bhkv:
        raise ValueError(f"query heads ({bh}) must be a multiple of KV heads ({bhkv})")
    if sq == 0 or skv == 0:
        raise ValueError("an empty sequence: nothing to attend to")
    if tuple(o.shape) != (bh, sq, d) or tuple(lse.shape) != (bh, sq):
        raise ValueError(f"o {tuple(o.shape)} and lse {tuple(lse.shape)} must be {(bh, sq, d)} and {(bh, sq)}")


def launch(q, k, v, o, lse, causal=False, scale=None, **constexprs):
    """o, lse = attention(q, k, v) in fp32: q, o (BH, SQ, D), k, v (BHKV, SKV, D) f32 with BH a multiple of
    BHKV; torch tensors (CUDA: compiled) or numpy arrays (the interpreter). Writes o and lse; returns the
    attention kernel's launch result. The constexprs are `policy(d)`; any given replace them."""
    from . import gemm_fp32

    check(q, k, v, o, lse)
    bh, sq, d = q.shape
    bhkv = k.shape[0]
    qh, ql = gemm_fp32.split(q, "nk")     # (BH, SQ, D): the head dim is the products' K
    kh, kl = gemm_fp32.split(k, "nk")
    vh, vl = gemm_fp32.split(v, "kn")     # (BHKV, D, SKVP): V^T, the keys are P V's K
    params = {**policy(d, sq, causal), "GROUP": bh // bhkv, **constexprs}
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    if not scale > 0:
        raise ValueError(f"scale={scale}: the kernel folds a positive scale into exp2")
    grid = (tp.cdiv(sq, 64 * params["CONSUMERS"]), bh)
    return attention_fp32[grid](qh, ql, kh, kl, vh, vl, o, lse, scale * math.log2(math.e), **params)


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
