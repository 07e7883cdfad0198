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
"""

import numpy as np

import tilepy as tp

MAX_STAGES = 4


def _threads(c):
    return 128 * (1 + c["CONSUMERS"])


def b_layout(BK, BN, atom=64):
    """(BK, BN) tile stored as BN // atom blocks of row-major (BK, atom): the wgmma MN-major canonical form."""
    return tp.Layout((BK, (atom, BN // atom)), (atom, (1, atom * BK)))


@tp.kernel(threads=_threads, target="sm_90a")
def gemm_hopper(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"], C: tp.Tensor[tp.f32, "M", "N"],
                BM: tp.constexpr = 128, BN: tp.constexpr = 128, BK: tp.constexpr = 64, STAGES: tp.constexpr = 4,
                CONSUMERS: tp.constexpr = 2, INSTR: tp.constexpr = tp.nv.wgmma_m64n128k16_bf16,
                SWIZZLE: tp.constexpr = tp.Swizzle(3, 3, 3)):
    m0 = tp.block_id(0) * BM
    n0 = tp.block_id(1) * BN
    a_s = tp.shared((BM, BK), tp.bf16, stages=STAGES, swizzle=SWIZZLE)
    b_s = tp.shared((BK, BN), tp.bf16, stages=STAGES, swizzle=SWIZZLE, layout=b_layout(BK, BN))
    # full[s]: the producer's copies into stage s landed; empty[s]: the consumers are done reading stage s.
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
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda k, j: ("B", k, j))
    k_tiles = tp.cdiv(A.shape[1], BK)
    rounds = tp.cdiv(k_tiles, STAGES)   # round j uses every stage once: tile k = j * STAGES + s
    if tp.warpgroup_id() == 0:          # producer warpgroup: one thread issues the bulk tensor copies
        for j in range(rounds):
            for s in tp.static_range(STAGES):
                k = j * STAGES + s
                if k < k_tiles:
                    if j > 0:
                        tp.mbarrier_wait(empty[s], j - 1)    # the consumers released stage s (round j - 1)
                    tp.copy_bulk(A[m0:m0 + BM, k * BK:(k + 1) * BK], a_s[s], full[s])
                    tp.copy_bulk(B[k * BK:(k + 1) * BK, n0:n0 + BN], b_s[s], full[s])
                    tp.mbarrier_arrive(full[s])
    else:                               # consumer warpgroups: wgmma over their own threads, 64 rows each
        acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), (CONSUMERS, 1)))
        for j in range(rounds):
            for s in tp.static_range(STAGES):
                k = j * STAGES + s
                if k < k_tiles:
                    tp.mbarrier_wait(full[s], j)             # stage s holds tile k
                    acc = tp.mma(a_s[s], b_s[s], acc)
                    tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])
                    tp.mbarrier_arrive(empty[s])
        tp.store(C[m0:m0 + BM, n0:n0 + BN], acc)


gemm_hopper_bf16 = gemm_hopper.retyped(C=tp.Tensor[tp.bf16, "M", "N"])  # bf16 out: tp.store rounds
KERNELS = {tp.f32: gemm_hopper, tp.bf16: gemm_hopper_bf16}


# H100, 4096^3 bf16: 128x256 s4 690 TFLOP/s (87% of cuBLAS), 128x256 s3 677, 128x128 s4 550 (benchmarks/NOTES.md)
PRESETS = {
    "sm_90a": dict(BM=128, BN=256, BK=64, STAGES=4, CONSUMERS=2, INSTR=tp.nv.wgmma_m64n256k16_bf16),
}
SMALL_TILE = dict(BN=128, INSTR=tp.nv.wgmma_m64n128k16_bf16)  # the 128x128 variant


def launch(a, b, c, target: str = "sm_90a", out_dtype=None, **constexprs):
    """c = a @ b; the output dtype is c's (f32 or bf16; for a float32 numpy c standing for bf16, out_dtype=tp.bf16)."""
    from tilepy.dtypes import from_any

    out = out_dtype or from_any(c.dtype)
    if out not in KERNELS:
        raise ValueError(f"gemm_hopper writes f32 or bf16, not {out}")
    params = {**PRESETS[target], **constexprs}
    grid = (tp.cdiv(a.shape[0], params["BM"]), tp.cdiv(b.shape[1], params["BN"]))
    return KERNELS[out][grid](a, b, c, target=target, **params)


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
