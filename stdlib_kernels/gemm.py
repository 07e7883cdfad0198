"""Tiled GEMM C = A @ B (bf16 in, f32 accumulate): A and B tiles staged in swizzled shared memory through a
multi-stage cp.async pipeline, multiplied with an explicit MMA instruction.

The instruction, warp grid, tile shape, stage count and swizzles are constexprs, so one source serves
mma.sync (sm_80/sm_90a), wgmma (sm_90a) and MFMA (gfx942); `PRESETS` holds a good point per target.
"""

import numpy as np

import tilepy as tp


def _threads(c):
    return c["WARPS"][0] * c["WARPS"][1] * c["INSTR"].threads


@tp.kernel(threads=_threads)
def gemm(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"], C: tp.Tensor[tp.f32, "M", "N"],
         BM: tp.constexpr = 64, BN: tp.constexpr = 64, BK: tp.constexpr = 32, STAGES: tp.constexpr = 2,
         INSTR: tp.constexpr = tp.nv.mma_m16n8k16_bf16, WARPS: tp.constexpr = (2, 2),
         SWIZZLE_A: tp.constexpr = tp.Swizzle(2, 3, 3), SWIZZLE_B: tp.constexpr = tp.Swizzle(3, 3, 3)):
    m0 = tp.block_id(0) * BM
    n0 = tp.block_id(1) * BN
    a_s = tp.shared((BM, BK), tp.bf16, stages=STAGES, swizzle=SWIZZLE_A)
    b_s = tp.shared((BK, BN), tp.bf16, stages=STAGES, swizzle=SWIZZLE_B)
    acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(INSTR, (BM, BN), WARPS))
    tp.tag(A, lambda i, k: ("A", i, k))
    tp.tag(B, lambda k, j: ("B", k, j))
    k_tiles = tp.cdiv(A.shape[1], BK)
    # Prologue: put the first STAGES - 1 tiles in flight.
    for s in tp.static_range(STAGES - 1):
        tp.copy_async(A[m0:m0 + BM, s * BK:(s + 1) * BK], a_s[s])
        tp.copy_async(B[s * BK:(s + 1) * BK, n0:n0 + BN], b_s[s])
        tp.commit_async()
    for k in tp.pipeline(k_tiles, stages=STAGES):
        tp.wait_async(STAGES - 2)   # tile k has landed (at most STAGES - 2 younger groups in flight)
        tp.barrier()                # ...for every thread; and everyone is done reading stage (k - 1) % STAGES
        nk = k + STAGES - 1         # refill the stage read in iteration k - 1 (tiles past K are masked to 0)
        tp.copy_async(A[m0:m0 + BM, nk * BK:(nk + 1) * BK], a_s[nk % STAGES])
        tp.copy_async(B[nk * BK:(nk + 1) * BK, n0:n0 + BN], b_s[nk % STAGES])
        tp.commit_async()
        acc = tp.mma(a_s[k % STAGES], b_s[k % STAGES], acc)
        tp.assert_tag(tp.mma_operands(acc), lambda a, b: a[2] == b[1])   # contraction indices agree
    tp.store(C[m0:m0 + BM, n0:n0 + BN], acc)


PRESETS = {
    "sm_80": dict(BM=64, BN=64, BK=32, STAGES=2, INSTR=tp.nv.mma_m16n8k16_bf16, WARPS=(2, 2)),
    "sm_90a": dict(BM=64, BN=64, BK=64, STAGES=2, INSTR=tp.nv.wgmma_m64n64k16_bf16, WARPS=(1, 1),
                   SWIZZLE_A=tp.Swizzle(3, 3, 3), SWIZZLE_B=tp.Swizzle(3, 3, 3)),
    # 64-byte rows read 8 bytes per lane by MFMA: XOR the 8-byte unit with row // 2 (tilepy-verify: degree 1)
    "gfx942": dict(BM=64, BN=64, BK=32, STAGES=2, INSTR=tp.amd.mfma_f32_32x32x8_bf16, WARPS=(2, 2),
                   SWIZZLE_A=tp.Swizzle(3, 2, 4)),
}


def launch(a, b, c, target: str = "sm_80", **constexprs):
    params = {**PRESETS[target], **constexprs}
    grid = (tp.cdiv(a.shape[0], params["BM"]), tp.cdiv(b.shape[1], params["BN"]))
    return gemm[grid](a, b, c, target=target, **params)


def reference(a, b):
    return np.asarray(a, np.float64) @ np.asarray(b, np.float64)


if __name__ == "__main__":
    import torch

    a = torch.randn(100, 72).to(torch.bfloat16)
    b = torch.randn(72, 90).to(torch.bfloat16)
    c = torch.empty(100, 90)
    launch(a, b, c)
    ref = reference(a.float().numpy(), b.float().numpy())
    print("rel err =", float(np.linalg.norm(c.numpy() - ref) / np.linalg.norm(ref)))
