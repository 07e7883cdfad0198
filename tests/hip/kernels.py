"""Small tilepy kernels that exercise what the stdlib kernels do not: roles, mbarriers, bulk copies, large
shared memory, shared-memory loads and stores, layout conversions, 2-D reductions, elementwise math."""

import pytest

import tilepy as tp
from stdlib_kernels import KERNELS, conv, gemm, gemm_hopper


@tp.kernel(threads=64, target="sm_90a")
def bulk_ws(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], BLOCK: tp.constexpr = 32):
    i0 = tp.block_id(0) * BLOCK
    s = tp.shared((BLOCK,), tp.f32)
    full = tp.mbarrier(1)
    if tp.warp_id() == 0:
        tp.copy_bulk(X[i0 : i0 + BLOCK], s, full)
        tp.mbarrier_arrive(full)
    else:
        tp.mbarrier_wait(full, 0)
        tp.store(Y[i0 : i0 + BLOCK], tp.load(s) * 2.0)


@tp.kernel(threads=256, target="sm_90a")
def producer_consumer(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], BLOCK: tp.constexpr = 512):
    i0 = tp.block_id(0) * BLOCK
    buf = tp.shared((BLOCK,), tp.f32)
    full = tp.mbarrier(1)
    wg = tp.warpgroup_id()
    if wg == 0:
        tp.store(buf, tp.load(X[i0 : i0 + BLOCK]) * 2.0)
        tp.mbarrier_arrive(full)
    else:
        tp.mbarrier_wait(full, 0)
        tp.store(Y[i0 : i0 + BLOCK], tp.load(buf) + 1.0)


@tp.kernel(threads=128)
def big_smem(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], BLOCK: tp.constexpr = 16384):
    """64 KB of shared memory: the launch must raise the dynamic shared-memory limit."""
    i0 = tp.block_id(0) * BLOCK
    s = tp.shared((BLOCK,), tp.f32)
    tp.copy(X[i0 : i0 + BLOCK], s)
    tp.barrier()
    tp.store(Y[i0 : i0 + BLOCK], tp.load(s) * 2.0)


@tp.kernel(threads=128)
def col_stats(
    X: tp.Tensor[tp.f32, "M", "N"],
    S: tp.Tensor[tp.f32, "N"],
    Mx: tp.Tensor[tp.f32, "N"],
    BM: tp.constexpr = 64,
    BN: tp.constexpr = 32,
):
    """Column sums and maxima of a (BM, BN) tile per block: a reduction along axis 0 of a 2-D tile."""
    n0 = tp.block_id(0) * BN
    rows = tp.arange(BM)
    valid = rows[:, None] < X.shape[0]
    x = tp.load(X[0:BM, n0 : n0 + BN])
    xm = tp.load(X[0:BM, n0 : n0 + BN], mask=valid, other=float("-inf"))
    tp.store(S[n0 : n0 + BN], tp.sum(x, axis=0))
    tp.store(Mx[n0 : n0 + BN], tp.max(xm, axis=0))


@tp.kernel(threads=128)
def row_math(X: tp.Tensor[tp.f32, "M", "N"], Y: tp.Tensor[tp.f32, "M", "N"], BN: tp.constexpr = 256):
    """Elementwise math, where/maximum, a cast round trip through bf16 and a layout conversion."""
    row = tp.block_id(0)
    x = tp.load(X[row, 0:BN])
    a = tp.tanh(x) + tp.sigmoid(x) * tp.silu(x) - tp.erf(x * 0.5)
    b = tp.where(x > 0, tp.sqrt(tp.abs(x)) + tp.exp2(x * 0.1), tp.log(tp.abs(x) + 1.0))
    c = tp.maximum(a, b) + tp.minimum(tp.sin(x), tp.cos(x))
    d = c.to(tp.bf16).to(tp.f32)
    e = tp.convert_layout(d, tp.blocked((BN,), 128, 1))
    tp.store(Y[row, 0:BN], e)


@tp.kernel(threads=128, target="sm_90a")
def tma_tile(X: tp.Tensor[tp.bf16, "M", "N"], Y: tp.Tensor[tp.f32, "M", "N"], BR: tp.constexpr = 64,
             BC: tp.constexpr = 64, SWIZZLE: tp.constexpr = tp.Swizzle(3, 3, 3), FALLBACK: tp.constexpr = True):
    """One bulk tensor copy of a (BR, BC) tile into a swizzled shared tile, read back through the swizzle:
    the output is right only if the copy engine's swizzle is the tile's."""
    r0 = tp.block_id(0) * BR
    c0 = tp.block_id(1) * BC
    s = tp.shared((BR, BC), tp.bf16, swizzle=SWIZZLE)
    bar = tp.mbarrier(1)
    tp.copy_bulk(X[r0 : r0 + BR, c0 : c0 + BC], s, bar, fallback=FALLBACK)
    tp.mbarrier_arrive(bar)
    tp.mbarrier_wait(bar, 0)
    tp.store(Y[r0 : r0 + BR, c0 : c0 + BC], tp.load(s).to(tp.f32))


# A bulk tensor copy / store must start on a 16-byte column (H100: an illegal instruction otherwise): column starts off
# it, literal (C0) and run-time (the block's column), which the render sends to the copy (benchmarks/profile/
# lead_tma_offset.py measured the fault and the fix)
@tp.kernel(threads=128, target="sm_90a")
def load_at(X: tp.Tensor[tp.bf16, "M", "N"], Y: tp.Tensor[tp.bf16, "M", "N"], C0: tp.constexpr = 0):
    r0 = tp.block_id(0) * 64
    s = tp.shared((64, 64), tp.bf16, swizzle=tp.Swizzle(3, 3, 3))
    bar = tp.mbarrier(1)
    tp.copy_bulk(X[r0:r0 + 64, C0:C0 + 64], s, bar)
    tp.mbarrier_arrive(bar)
    tp.mbarrier_wait(bar, 0)
    tp.store(Y[r0:r0 + 64, C0:C0 + 64], tp.load(s))


@tp.kernel(threads=128, target="sm_90a")
def store_at(X: tp.Tensor[tp.bf16, "M", "N"], Y: tp.Tensor[tp.bf16, "M", "N"], C0: tp.constexpr = 0):
    r0 = tp.block_id(0) * 64
    s = tp.shared((64, 64), tp.bf16, swizzle=tp.Swizzle(3, 3, 3))
    tp.store(s, tp.load(X[r0:r0 + 64, C0:C0 + 64]))
    tp.barrier()
    tp.store_bulk(s, Y[r0:r0 + 64, C0:C0 + 64])
    tp.store_bulk_wait(s)


@tp.kernel(threads=128, target="sm_90a")
def store_dyn(X: tp.Tensor[tp.bf16, "M", "N"], Y: tp.Tensor[tp.bf16, "M", "N"]):
    """Block (i, j) stores columns j .. j + 63: a run-time first column (the render's guard takes the copy where it
    is off 16 bytes); overlapping blocks write the same values."""
    r0 = tp.block_id(0) * 64
    c0 = tp.block_id(1)
    s = tp.shared((64, 64), tp.bf16, swizzle=tp.Swizzle(3, 3, 3))
    tp.store(s, tp.load(X[r0:r0 + 64, c0:c0 + 64]))
    tp.barrier()
    tp.store_bulk(s, Y[r0:r0 + 64, c0:c0 + 64])
    tp.store_bulk_wait(s)


@tp.kernel(threads=128, target="sm_90a")
def load_dyn(X: tp.Tensor[tp.bf16, "M", "N"], Y: tp.Tensor[tp.bf16, "M", "N"]):
    r0 = tp.block_id(0) * 64
    c0 = tp.block_id(1)
    s = tp.shared((64, 64), tp.bf16, swizzle=tp.Swizzle(3, 3, 3))
    bar = tp.mbarrier(1)
    tp.copy_bulk(X[r0:r0 + 64, c0:c0 + 64], s, bar)
    tp.mbarrier_arrive(bar)
    tp.mbarrier_wait(bar, 0)
    tp.store(Y[r0:r0 + 64, c0:c0 + 64], tp.load(s))


def stdlib_constexprs(name, target):
    """The constexprs to build stdlib kernel `name` for `target` with (gemm_hopper exists on sm_90a only)."""
    if name == "gemm_hopper" and target != "sm_90a":
        with pytest.raises((tp.TargetError, tp.ResourceError)):  # Hopper-only ops (or 64 KB of LDS)
            KERNELS[name].ir(target, **gemm_hopper.PRESETS["sm_90a"])
        pytest.skip("gemm_hopper is an sm_90a kernel")
    if name == "gemm_hopper":
        return gemm_hopper.PRESETS[target]
    if name in ("conv2d", "conv_transpose2d"):
        return conv.PRESETS[target]
    return gemm.PRESETS[target] if name == "gemm" else {}


# Shared -> global copies into rows whose addresses are off 16 bytes (an odd width, a base or first column mid-chunk):
# the render stores each row's aligned body in 16-byte vectors and its head and tail by element
# (tilepy_hip/render/copies.py _store_rows_realigned). One kernel per element size: 2, 4 and 1 bytes.
@tp.kernel(threads=128)
def rows_out_bf16(X: tp.Tensor[tp.bf16, "M", "N"], Y: tp.Tensor[tp.bf16, "M", "N"], BM: tp.constexpr = 32,
                  BN: tp.constexpr = 64, C0: tp.constexpr = 0, SWIZZLED: tp.constexpr = 1):
    r0 = tp.block_id(0) * BM
    c0 = tp.block_id(1) * BN + C0
    if SWIZZLED:
        s = tp.shared((BM, BN), tp.bf16, swizzle=tp.Swizzle(3, 3, 3))
    else:
        s = tp.shared((BM, BN), tp.bf16)
    tp.store(s, tp.load(X[r0:r0 + BM, c0:c0 + BN]))
    tp.barrier()
    tp.copy(s, Y[r0:r0 + BM, c0:c0 + BN])


@tp.kernel(threads=128)
def rows_out_f32(X: tp.Tensor[tp.f32, "M", "N"], Y: tp.Tensor[tp.f32, "M", "N"], BM: tp.constexpr = 32,
                 BN: tp.constexpr = 64, C0: tp.constexpr = 0):
    r0 = tp.block_id(0) * BM
    c0 = tp.block_id(1) * BN + C0
    s = tp.shared((BM, BN), tp.f32)
    tp.store(s, tp.load(X[r0:r0 + BM, c0:c0 + BN]))
    tp.barrier()
    tp.copy(s, Y[r0:r0 + BM, c0:c0 + BN])


@tp.kernel(threads=128)
def rows_out_e4m3(X: tp.Tensor[tp.e4m3, "M", "N"], Y: tp.Tensor[tp.e4m3, "M", "N"], BM: tp.constexpr = 32,
                  BN: tp.constexpr = 64, C0: tp.constexpr = 0):
    r0 = tp.block_id(0) * BM
    c0 = tp.block_id(1) * BN + C0
    s = tp.shared((BM, BN), tp.e4m3)
    tp.copy(X[r0:r0 + BM, c0:c0 + BN], s)
    tp.barrier()
    tp.copy(s, Y[r0:r0 + BM, c0:c0 + BN])
