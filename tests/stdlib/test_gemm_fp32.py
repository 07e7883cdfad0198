"""TF32 on the CPU interpreter and the fp32-accurate GEMM (stdlib_kernels/gemm_fp32.py): tf32 rounding and
truncation at the bit level, the interpreter's tf32 operand model (the low 13 mantissa bits ignored, as the
tensor cores do) for wgmma and mma.sync, and the 3xTF32 GEMM's error against float64 next to an f32 GEMM's
on ragged shapes, both B layouts, batches and a B shared by every batch. Outputs are poisoned with NaN first."""

import os
import sys

import numpy as np
import pytest

import tilepy as tp
from stdlib_kernels import gemm_fp32
from tilepy.instructions import round_tf32, truncate_tf32

sys.path.insert(0, os.path.dirname(__file__))
from tf32_kernels import mma_sync_tf32, tf32_probe  # noqa: E402


def _bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


def test_round_tf32_ties_away_and_keeps_specials():
    one = np.float32(1.0)
    ulp = 2.0**-10
    x = np.array([1 + ulp / 2, 1 + ulp / 2 - 2**-23, -(1 + ulp / 2), 1 + 3 * ulp / 2, np.inf, -np.inf, 0.0],
                 np.float32)
    want = np.array([1 + ulp, 1, -(1 + ulp), 1 + 2 * ulp, np.inf, -np.inf, 0.0], np.float32)
    np.testing.assert_array_equal(round_tf32(x), want)
    assert np.isnan(round_tf32(np.float32(np.nan)))
    assert (_bits(round_tf32(np.float32(np.pi))) & 0x1FFF) == 0 and round_tf32(one) == one


def test_truncate_tf32_drops_the_low_bits():
    x = np.array([1 + 2.0**-10 + 2.0**-11, -(1 + 2.0**-11 + 2.0**-20)], np.float32)
    np.testing.assert_array_equal(truncate_tf32(x), np.array([1 + 2.0**-10, -1.0], np.float32))


def test_split_keeps_21_bits():
    x = np.random.default_rng(0).standard_normal(100_000).astype(np.float32) * 1e3
    hi = round_tf32(x)
    lo = round_tf32(x - hi)                     # x - hi is exact in f32
    assert np.array_equal(x - hi + hi, x)
    err = np.abs((hi.astype(np.float64) + lo) - x) / np.abs(x)
    assert err.max() <= 2.0**-21


def test_round_tf32_in_a_kernel():
    @tp.kernel(threads=64)
    def split(X: tp.Tensor[tp.f32, "N"], H: tp.Tensor[tp.f32, "N"], L: tp.Tensor[tp.f32, "N"]):
        x = tp.load(X[0:256])
        h = tp.round_tf32(x)
        tp.store(H[0:256], h)
        tp.store(L[0:256], tp.round_tf32(x - h))

    x = np.random.default_rng(1).standard_normal(200).astype(np.float32)
    h, lo = np.full_like(x, np.nan), np.full_like(x, np.nan)
    split[(1,)](x, h, lo)
    np.testing.assert_array_equal(h, round_tf32(x))
    np.testing.assert_array_equal(lo, round_tf32(x - round_tf32(x)))


def test_round_tf32_of_an_integer_tile_is_a_type_error():
    @tp.kernel(threads=64)
    def bad(X: tp.Tensor[tp.i32, 64]):
        tp.store(X[0:64], tp.round_tf32(tp.load(X[0:64])))

    with pytest.raises(tp.KernelTypeError, match="round_tf32 of an integer"):
        bad.ir()


def _operands():
    rng = np.random.default_rng(2)
    # random low mantissa bits: a tf32 instruction must ignore them (truncation), not round them
    a = (rng.standard_normal((64, 32)) * (1 + rng.integers(0, 2**13, (64, 32)) * 2.0**-23)).astype(np.float32)
    b = rng.standard_normal((64, 32)).astype(np.float32)
    return a, b


def test_wgmma_tf32_reads_truncated_operands():
    a, b = _operands()
    c = np.full((64, 64), np.nan, np.float32)
    tf32_probe[(1,)](a, b, c)
    want = truncate_tf32(a).astype(np.float64) @ truncate_tf32(b).astype(np.float64).T
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)
    assert np.abs(c - a.astype(np.float64) @ b.T.astype(np.float64)).max() > 1e-3   # not an f32 product


def test_mma_sync_tf32_fragments():
    a, b = _operands()
    a, b = a[:32, :16].copy(), b[:16, :16].T.copy()   # A (32, 16), B (16, 16): (K, N)
    c = np.full((32, 16), np.nan, np.float32)
    mma_sync_tf32[(1,)](a, b, c)
    want = truncate_tf32(a).astype(np.float64) @ truncate_tf32(b).astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


def _rel(out, ref):
    out = np.asarray(out, np.float64)
    assert not np.isnan(out).any(), "some output element was never written"
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("b_layout", ["nk", "kn"])
@pytest.mark.parametrize("shape,params", [
    ((130, 70, 100), dict(STAGES=2)),     # 4 k-tiles through 2 stages, M and N partial
    ((64, 129, 40), dict(STAGES=3, BN=64, INSTR=tp.nv.wgmma_m64n64k8_tf32)),   # 2 k-tiles, 3 stages
])
def test_gemm_fp32_matches_f32_accuracy(b_layout, shape, params):
    m, n, k = shape
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n) if b_layout == "kn" else (n, k)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    gemm_fp32.launch(a, b, c, b_layout=b_layout, **params)
    ref = gemm_fp32.reference(a, b, b_layout)
    f32 = (a @ (b if b_layout == "kn" else b.T)).astype(np.float32)
    assert _rel(c, ref) <= 1.5 * _rel(f32, ref)
    assert _rel(c, ref) < 3e-7      # a single TF32 product is ~1e-3 off


def test_gemm_fp32_batched_with_a_shared_b():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 70, 64)).astype(np.float32)
    b = rng.standard_normal((1, 40, 64)).astype(np.float32)   # one (N, K) weight for both batches
    c = np.full((2, 70, 40), np.nan, np.float32)
    gemm_fp32.launch(a, b, c, b_layout="nk", STAGES=2)
    assert _rel(c, gemm_fp32.reference(a, b, "nk")) < 3e-7


def test_gemm_fp32_launch_checks_shapes():
    a = np.zeros((8, 16), np.float32)
    with pytest.raises(ValueError, match="shapes do not agree"):
        gemm_fp32.launch(a, np.zeros((12, 8), np.float32), np.zeros((8, 8), np.float32), b_layout="kn")
    with pytest.raises(ValueError, match="b_layout"):
        gemm_fp32.launch(a, a, a, b_layout="tn")


@pytest.mark.parametrize("b_layout", ["nk", "kn"])
def test_split_pads_k_and_transposes(b_layout):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 37, 23)).astype(np.float32)     # K = 23 (nk) or 37 (kn): padded to 24 / 40
    hi, lo = gemm_fp32.split(x, b_layout)
    xk = x if b_layout == "nk" else np.swapaxes(x, 1, 2)          # the K-major view
    K = xk.shape[2]
    assert hi.shape == (2, xk.shape[1], -(-K // 4) * 4)
    np.testing.assert_array_equal(hi[..., :K], round_tf32(xk))
    np.testing.assert_array_equal(lo[..., :K], round_tf32(xk - round_tf32(xk)))
    assert not hi[..., K:].any() and not lo[..., K:].any()


def test_gemm_fp32_single_accumulator_is_also_right_on_the_interpreter():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 96)).astype(np.float32)
    b = rng.standard_normal((40, 96)).astype(np.float32)
    c = np.full((64, 40), np.nan, np.float32)
    gemm_fp32.launch(a, b, c, b_layout="nk", STAGES=2, PROMOTE=False)
    assert _rel(c, gemm_fp32.reference(a, b, "nk")) < 3e-7


@pytest.mark.parametrize("group_m", [1, 2, 3])
def test_gemm_fp32_grouped_tile_order_covers_every_tile(group_m):
    rng = np.random.default_rng(6)
    a = rng.standard_normal((5 * 64 - 3, 40)).astype(np.float32)   # 5 row tiles: a partial last group
    b = rng.standard_normal((3 * 64 - 1, 40)).astype(np.float32)
    c = np.full((a.shape[0], b.shape[0]), np.nan, np.float32)
    gemm_fp32.launch(a, b, c, b_layout="nk", BM=64, BN=64, CONSUMERS=1, STAGES=2, GROUP_M=group_m,
                     INSTR=tp.nv.wgmma_m64n64k8_tf32)
    assert _rel(c, gemm_fp32.reference(a, b, "nk")) < 3e-7


def test_gemm_fp32_two_dimensional_grid_also_covers_every_tile():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((1, 200, 40)).astype(np.float32)
    b = rng.standard_normal((1, 130, 40)).astype(np.float32)
    c = np.full((1, 200, 130), np.nan, np.float32)
    (ah, al), (bh, bl) = gemm_fp32.split(a), gemm_fp32.split(b)
    p = dict(BM=64, BN=64, CONSUMERS=1, STAGES=2, GROUP_M=2, INSTR=tp.nv.wgmma_m64n64k8_tf32)
    gemm_fp32.gemm_fp32[(4, 3, 1)](ah, al, bh, bl, c, **p)     # (row tiles, column tiles, batch)
    assert _rel(c, gemm_fp32.reference(a, b, "nk")) < 3e-7


@pytest.mark.parametrize("ksplit,k", [(3, 300), (4, 70)])   # 10 k-tiles in shares of 4; 3 tiles: one empty share
def test_gemm_fp32_split_k(ksplit, k):
    """Split-K: the partial products over shares of K add up to the fp32-accurate product (a share with no
    k-tiles contributes zeros)."""
    rng = np.random.default_rng(k)
    a = rng.standard_normal((2, 40, k)).astype(np.float32)
    b = rng.standard_normal((k, 24)).astype(np.float32)
    c = np.full((2, 40, 24), np.nan, np.float32)
    gemm_fp32.launch(a, b, c, b_layout="kn", STAGES=2, BN=64, INSTR=tp.nv.wgmma_m64n64k8_tf32, KSPLIT=ksplit)
    assert _rel(c, gemm_fp32.reference(a, b)) < 3e-7


@pytest.mark.parametrize("b_layout", ["nk", "kn"])
def test_gemm_fp32_one_pass_is_the_tf32_product(b_layout):
    """PASSES=1 (--precision tf32): one TF32 product of the rounded heads, f32 accumulation: the float64
    product of round_tf32(a) and round_tf32(b) to f32 accuracy, and TF32's distance from the exact product."""
    m, n, k = 130, 70, 100
    rng = np.random.default_rng(11)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n) if b_layout == "kn" else (n, k)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    gemm_fp32.launch(a, b, c, b_layout=b_layout, STAGES=2, PASSES=1)
    heads = gemm_fp32.reference(round_tf32(a), round_tf32(b), b_layout)
    assert _rel(c, heads) < 3e-7
    assert _rel(c, gemm_fp32.reference(a, b, b_layout)) > 1e-5     # not the 3xTF32 result
