"""G38 prototype (issue 15 item 4, lever 2): gemm_fp32 with a "kn" B read as it is and split inside the GEMM, so the
whole c = a @ b is one launch (no split_tf32_t pass). NOT TIMED on a GPU, not in `gemm_fp32.launch`: kept here, out of
the stdlib, until a device call measures it (`benchmarks/profile/g38_call3.sh`).

The producer copies A's plain (BM, BK) tile (K-major, as A_RAW) and B's plain (BK, BN) tile as it lies in a (K, N)
tensor (N-major, unswizzled) by TMA. tf32 wgmma reads shared operands K-major only, so the consumers make B's halves:
each of the 128 * CONSUMERS threads loads 4 consecutive k of one column n per value group (`b_layout`: a warp's 32
lanes read 32 consecutive columns of one row, conflict-free), rounds hi = round_tf32(b), lo = round_tf32(b - hi) and
stores both transposed into (BN, BK) K-major tiles under the 128-byte swizzle (16 bytes a store), double-buffered by k
% 2. The consumer warpgroups share those tiles, so after their stores they arrive on `made` and wait for its k-th
phase (rendered as a barrier over the consumers, an elected arrival and the wait; the shared stores carry the
async-proxy fence) before their wgmma: buffer k % 2 is rewritten at k + 2 only after every consumer passed `made`
at k + 1, which comes after its chains of k retired (mma_wait). A is split in registers (A_RAW) and the three chains
run as in gemm_fp32 (al b_hi, ah b_lo, ah b_hi, promoted into the f32 sum), so C is bit for bit launch's.

Limits: B's rows must be 16-byte multiples (N % 4 == 0) and A's too (K % 4 == 0) for TMA; BN must divide 128 *
CONSUMERS and be a power of two (register tiles): 64 or 128 (not the 96-wide tiles of launch_policy, and not
2051 x 2045 x 1000, whose B rows are 8180 bytes). STAGES even is not needed (the halves' buffer is k % 2).

AHEAD=1 makes tile k + 1's halves while tile k's chains run (the conversion off the consumers' critical path).

Interpreter: bit for bit launch's product, both forms (tests/stdlib/test_gemm_fp32_bkn.py); tilepy-verify clean
(0.2-1.0 s; it finds the race without `made`, and AHEAD's with one halves buffer). Host SASS (sm_90a): BN 64 123
registers (AHEAD 161), no local memory, 48 HGMMA, ptxas does not serialize the wgmma; BN 128 with setmaxnreg 40 / 232
168 registers and 4 bytes of spill (9 LDL / STL; AHEAD 14), without budgets 236 bytes of spill stores.
"""

import numpy as np

import tilepy as tp
from stdlib_kernels.gemm_fp32 import rs_instr


def _threads(c):
    return 128 * (1 + c["CONSUMERS"])


def b_layout(bk: int, bn: int, threads: int) -> tp.TVLayout:
    """The consumers' share of B's raw (bk, bn) tile: thread t holds column t % bn, rows 4 (t // bn) + v + 4 (threads //
    bn) r (v < 4 consecutive rows, its fastest values: the transposed store is 16 bytes)."""
    groups = threads // bn
    return tp.TVLayout((bk, bn), (bn, groups), (4, bk * bn // (4 * threads)),
                       (((0, 4), (1, 4 * groups)), ((1, 0), (0, 0))))


@tp.kernel(threads=_threads, target="sm_90a")
def gemm_fp32_bkn(A: tp.Tensor[tp.f32, "BA", "M", "K"], B: tp.Tensor[tp.f32, "BB", "K", "N"],
                  C: tp.Tensor[tp.f32, "BC", "M", "N"],
                  BM: tp.constexpr = 128, BN: tp.constexpr = 64, BK: tp.constexpr = 32, STAGES: tp.constexpr = 4,
                  CONSUMERS: tp.constexpr = 2, INSTR: tp.constexpr = tp.nv.wgmma_m64n64k8_tf32,
                  SWIZZLE: tp.constexpr = tp.Swizzle(3, 2, 3), GROUP_M: tp.constexpr = 8, TMA_ONLY: tp.constexpr = 1,
                  PRODUCER_REGS: tp.constexpr = 0, CONSUMER_REGS: tp.constexpr = 0, AHEAD: tp.constexpr = 0):
    """C[z] = A[z] @ B[zb] (zb = min(z, BB - 1)) in fp32 accuracy from plain f32 A (K % 4 == 0) and B (N % 4 == 0).
    AHEAD=1: tile k + 1's halves are made while tile k's chains run (between their issue and their wait), into the
    other buffer; the arrivals (the raw stage's release, `made`) after the wait, so a consumer past `made` at k has
    retired its chains of k - 1, the last reader of the buffer being written (with one buffer the verifier finds
    the race)."""
    z = tp.block_id(2)
    zb = tp.min(z, B.shape[0] - 1)
    pid = tp.block_id(0) + tp.num_blocks(0) * tp.block_id(1)
    num_m = tp.cdiv(A.shape[1], BM)
    in_group = GROUP_M * tp.cdiv(B.shape[2], BN)
    first_m = (pid // in_group) * GROUP_M
    group_m = num_m - first_m if num_m - first_m < GROUP_M else GROUP_M
    m0 = (first_m + (pid % in_group) % group_m) * BM
    n0 = ((pid % in_group) // group_m) * BN
    a_raw = tp.shared((BM, BK), tp.f32, stages=STAGES, swizzle=SWIZZLE)
    b_raw = tp.shared((BK, BN), tp.f32, stages=STAGES)              # B's tile as it lies (N-major)
    NB = 2                                                          # buffers of B's halves
    b_hi = tp.shared((BN, BK), tp.f32, stages=NB, swizzle=SWIZZLE)  # its K-major halves, made by the consumers
    b_lo = tp.shared((BN, BK), tp.f32, stages=NB, swizzle=SWIZZLE)
    full = tp.mbarrier(1, stages=4)             # stage s's two copies landed (STAGES <= 4)
    empty = tp.mbarrier(1, stages=4)            # the consumers hold stage s's tiles in registers
    made = tp.mbarrier(1)                       # B's halves of this k-tile are in shared memory
    tp.tag(A, lambda b, i, k: ("A", i, k))
    tp.tag(B, lambda b, k, j: ("B", k, j))
    k_tiles = tp.cdiv(A.shape[2], BK)
    LC = tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1))
    RS = rs_instr(INSTR)
    LA = tp.mma_layout(RS, "a", (BM, BK), (CONSUMERS, 1))
    LB = b_layout(BK, BN, 128 * CONSUMERS)
    rounds = tp.cdiv(k_tiles, STAGES)           # round j uses every stage once: tile k = j * STAGES + s
    if tp.warpgroup_id() == 0:
        if PRODUCER_REGS > 0:
            tp.setmaxnreg(PRODUCER_REGS)
        for j in range(rounds):
            for s in tp.static_range(STAGES):
                k = j * STAGES + s
                if k < k_tiles:
                    if j > 0:
                        tp.mbarrier_wait(empty[s], j - 1)
                    k0 = k * BK
                    tp.copy_bulk(A[z, m0:m0 + BM, k0:k0 + BK], a_raw[s], full[s], fallback=TMA_ONLY == 0)
                    tp.copy_bulk(B[zb, k0:k0 + BK, n0:n0 + BN], b_raw[s], full[s], fallback=TMA_ONLY == 0)
                    tp.mbarrier_arrive(full[s])
    else:
        if CONSUMER_REGS > 0:
            tp.setmaxnreg(CONSUMER_REGS)
        acc = tp.zeros((BM, BN), tp.f32, layout=LC)
        if AHEAD:
            ra = tp.zeros((BM, BK), tp.f32, layout=LA)
            if k_tiles > 0:                             # tile 0's halves before the loop
                tp.mbarrier_wait(full[0], 0)
                ra = tp.load(a_raw[0], layout=LA)
                rb = tp.load(b_raw[0], layout=LB)
                tp.mbarrier_arrive(empty[0])
                bh = tp.round_tf32(rb)
                tp.store(b_hi[0], bh.T)
                tp.store(b_lo[0], tp.round_tf32(rb - bh).T)
                tp.mbarrier_arrive(made)
            for j in range(rounds):
                for s in tp.static_range(STAGES):
                    k = j * STAGES + s
                    if k < k_tiles:
                        tp.mbarrier_wait(made, k)           # tile k's halves from every consumer
                        ah = tp.round_tf32(ra)
                        al = tp.round_tf32(ra - ah)
                        part = tp.zeros((BM, BN), tp.f32, layout=LC)
                        part = tp.mma_async(al, b_hi[k % NB].T, part, instr=RS)
                        part = tp.mma_async(ah, b_lo[k % NB].T, part, instr=RS)
                        part = tp.mma_async(ah, b_hi[k % NB].T, part, instr=RS)
                        if k + 1 < k_tiles:                 # tile k + 1's halves while the chains run
                            tp.mbarrier_wait(full[(s + 1) % STAGES], j + (s + 1) // STAGES)
                            ra = tp.load(a_raw[(s + 1) % STAGES], layout=LA)
                            rb = tp.load(b_raw[(s + 1) % STAGES], layout=LB)
                            bh = tp.round_tf32(rb)
                            tp.store(b_hi[(k + 1) % NB], bh.T)
                            tp.store(b_lo[(k + 1) % NB], tp.round_tf32(rb - bh).T)
                        tp.mma_wait(0)
                        if k + 1 < k_tiles:                 # (the arrivals after the wait: no stage is
                            tp.mbarrier_arrive(empty[(s + 1) % STAGES])     # released under a running group)
                            tp.mbarrier_arrive(made)
                        acc = acc + part
        else:
            for j in range(rounds):
                for s in tp.static_range(STAGES):
                    k = j * STAGES + s
                    if k < k_tiles:
                        tp.mbarrier_wait(full[s], j)
                        ra = tp.load(a_raw[s], layout=LA)
                        rb = tp.load(b_raw[s], layout=LB)
                        tp.mbarrier_arrive(empty[s])
                        bh = tp.round_tf32(rb)
                        tp.store(b_hi[k % NB], bh.T)
                        tp.store(b_lo[k % NB], tp.round_tf32(rb - bh).T)
                        tp.mbarrier_arrive(made)            # every consumer's share of the halves written ...
                        tp.mbarrier_wait(made, k)           # ... before any consumer's wgmma reads them
                        ah = tp.round_tf32(ra)
                        al = tp.round_tf32(ra - ah)         # (exact in f32)
                        part = tp.zeros((BM, BN), tp.f32, layout=LC)
                        part = tp.mma_async(al, b_hi[k % NB].T, part, instr=RS)
                        part = tp.mma_async(ah, b_lo[k % NB].T, part, instr=RS)
                        part = tp.mma_async(ah, b_hi[k % NB].T, part, instr=RS)
                        tp.mma_wait(0)
                        acc = acc + part                    # round-to-nearest f32 adds across k-tiles
        tp.store(C[z, m0:m0 + BM, n0:n0 + BN], acc)


_N = {64: tp.nv.wgmma_m64n64k8_tf32, 128: tp.nv.wgmma_m64n128k8_tf32}


def params(bn: int = 64) -> dict:
    """The prototype's constexprs at a tile width (128 wide with launch's kn register budgets)."""
    return {"BN": bn, "INSTR": _N[bn], **({"PRODUCER_REGS": 40, "CONSUMER_REGS": 232} if bn == 128 else {})}


def launch_bkn(a, b, c, **constexprs):
    """c = a @ b, a (M, K) with K % 4 == 0, b (K, N) with N % 4 == 0, in one launch."""
    a3 = a if a.ndim == 3 else a.reshape(1, *a.shape)
    b3 = b if b.ndim == 3 else b.reshape(1, *b.shape)
    c3 = c if c.ndim == 3 else c.reshape(1, *c.shape)
    if a3.shape[2] % 4 or b3.shape[2] % 4 or a3.shape[2] != b3.shape[1]:
        raise ValueError(f"gemm_fp32_bkn reads a and b by TMA: K and N multiples of 4, got a {tuple(a.shape)}, b "
                         f"{tuple(b.shape)}")
    p = {**params(), **constexprs}
    grid = (tp.cdiv(a3.shape[1], p.get("BM", 128)) * tp.cdiv(c3.shape[2], p["BN"]), 1, a3.shape[0])
    return gemm_fp32_bkn[grid](a3, b3, c3, **p)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    for M, N, K, bn in ((130, 200, 72, 128), (100, 68, 40, 64)):
        a = rng.standard_normal((M, K)).astype(np.float32)
        b = rng.standard_normal((K, N)).astype(np.float32)
        c = np.full((M, N), np.nan, np.float32)
        launch_bkn(a, b, c, **params(bn))
        ref = a.astype(np.float64) @ b.astype(np.float64)
        print(M, N, K, bn, "rel err", float(np.linalg.norm(c - ref) / np.linalg.norm(ref)))
