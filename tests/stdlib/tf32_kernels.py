"""A one-instruction TF32 kernel shared by the CPU and GPU tests: C = A @ B.T through one wgmma m64n64k8 .tf32
chain over K = 32, A (64, 32) and B (64, 32) both K-major in 128-byte-swizzled shared memory."""

import tilepy as tp


@tp.kernel(threads=128, target="sm_90a")
def tf32_probe(A: tp.Tensor[tp.f32, 64, 32], B: tp.Tensor[tp.f32, 64, 32], C: tp.Tensor[tp.f32, 64, 64],
               INSTR: tp.constexpr = tp.nv.wgmma_m64n64k8_tf32):
    a = tp.shared((64, 32), tp.f32, swizzle=tp.Swizzle(3, 2, 3))
    b = tp.shared((64, 32), tp.f32, swizzle=tp.Swizzle(3, 2, 3))
    tp.copy(A[0:64, 0:32], a)
    tp.copy(B[0:64, 0:32], b)
    tp.barrier()
    acc = tp.zeros((64, 64), tp.f32, layout=tp.accumulator(INSTR, (64, 64)))
    acc = tp.mma(a, b.T, acc)
    tp.store(C[0:64, 0:64], acc)


@tp.kernel(threads=64, target="sm_80")
def mma_sync_tf32(A: tp.Tensor[tp.f32, 32, 16], B: tp.Tensor[tp.f32, 16, 16], C: tp.Tensor[tp.f32, 32, 16],
                  INSTR: tp.constexpr = tp.nv.mma_m16n8k8_tf32):
    """A (32, 16) @ B (16, 16) with mma.sync m16n8k8 .tf32 over 2 x 1 warps, operands loaded straight into
    the instruction's fragment layouts."""
    a = tp.load(A[0:32, 0:16], layout=tp.mma_layout(INSTR, "a", (32, 16), (2, 1)))
    b = tp.load(B[0:16, 0:16], layout=tp.mma_layout(INSTR, "b", (16, 16), (2, 1)))
    acc = tp.zeros((32, 16), tp.f32, layout=tp.accumulator(INSTR, (32, 16), (2, 1)))
    acc = tp.mma(a, b, acc)
    tp.store(C[0:32, 0:16], acc)


@tp.kernel(threads=128, target="sm_80")
def mma_sync_tf32_smem(A: tp.Tensor[tp.f32, 32, 32], B: tp.Tensor[tp.f32, 64, 32], C: tp.Tensor[tp.f32, 32, 64],
                       INSTR: tp.constexpr = tp.nv.mma_m16n8k8_tf32):
    """A (32, 32) @ B.T with B (64, 32) stored K-major: mma.sync .tf32 over 2 x 2 warps through ldmatrix from
    128-byte-swizzled shared memory (B reaches the instruction as the transposed view b.T)."""
    a = tp.shared((32, 32), tp.f32, swizzle=tp.Swizzle(3, 2, 3))
    b = tp.shared((64, 32), tp.f32, swizzle=tp.Swizzle(3, 2, 3))
    tp.copy(A[0:32, 0:32], a)
    tp.copy(B[0:64, 0:32], b)
    tp.barrier()
    acc = tp.zeros((32, 64), tp.f32, layout=tp.accumulator(INSTR, (32, 64), (2, 2)))
    acc = tp.mma(a, b.T, acc)
    tp.store(C[0:32, 0:64], acc)


@tp.kernel(threads=128, target="sm_90a")
def tf32_probe_rs(A: tp.Tensor[tp.f32, 64, 32], B: tp.Tensor[tp.f32, 64, 32], C: tp.Tensor[tp.f32, 64, 64],
                  INSTR: tp.constexpr = tp.nv.wgmma_m64n64k8_tf32_rs):
    """tf32_probe with A in registers (wgmma's register-A form): A loaded from global memory straight into the
    instruction's A fragments (4 k-steps of 8 columns), B K-major in shared memory."""
    a = tp.load(A[0:64, 0:32], layout=tp.mma_layout(INSTR, "a", (64, 32), (1, 1)))
    b = tp.shared((64, 32), tp.f32, swizzle=tp.Swizzle(3, 2, 3))
    tp.copy(B[0:64, 0:32], b)
    tp.barrier()
    acc = tp.zeros((64, 64), tp.f32, layout=tp.accumulator(INSTR, (64, 64)))
    acc = tp.mma(a, b.T, acc)
    tp.store(C[0:64, 0:64], acc)
