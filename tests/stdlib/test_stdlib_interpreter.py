"""Stdlib kernels on the CPU interpreter against numpy/torch in float64, on random shapes that are not
multiples of the tiles. Outputs are poisoned with NaN first so an unwritten element fails."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tilepy as tp
from stdlib_kernels import gemm, rmsnorm, softmax, vector_add


def rel_err(out, ref) -> float:
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    assert not np.isnan(out).any(), "some output element was never written"
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 5000), block=st.sampled_from([128, 512, 1024]), seed=st.integers(0, 2**31))
def test_vector_add(n, block, seed):
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    z = np.full(n, np.nan, np.float32)
    vector_add.launch(x, y, z, BLOCK=block)
    assert rel_err(z, vector_add.reference(x, y)) < 1e-7


@settings(max_examples=12, deadline=None)
@given(m=st.integers(1, 24), n=st.integers(1, 1500), seed=st.integers(0, 2**31))
def test_softmax(m, n, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((m, n)) * 4).astype(np.float32)
    y = np.full_like(x, np.nan)
    softmax.launch(x, y)
    ref = softmax.reference(x)
    assert rel_err(y, ref) < 1e-6
    np.testing.assert_allclose(y.sum(axis=1), 1.0, rtol=1e-5)


@settings(max_examples=12, deadline=None)
@given(m=st.integers(1, 24), n=st.integers(1, 1500), seed=st.integers(0, 2**31))
def test_rmsnorm(m, n, seed):
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal((m, n), dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    y = np.full_like(x, np.nan)
    rmsnorm.launch(x, w, y, eps=1e-5)
    assert rel_err(y, rmsnorm.reference(x, w, eps=1e-5)) < 1e-6


def test_softmax_on_torch_cpu_tensors():
    x = torch.randn(5, 300)
    y = torch.full_like(x, float("nan"))
    softmax.launch(x, y)
    torch.testing.assert_close(y.double(), torch.softmax(x.double(), dim=1), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("target", sorted(gemm.PRESETS))
@settings(max_examples=6, deadline=None)
@given(m=st.integers(1, 150), n=st.integers(1, 150), k=st.integers(1, 150), seed=st.integers(0, 2**31))
def test_gemm_presets(target, m, n, k, seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16)
    b = torch.randn(k, n, generator=g).to(torch.bfloat16)
    c = torch.full((m, n), float("nan"))
    gemm.launch(a, b, c, target=target)
    # bf16 products are exact in f32; only the f32 accumulation rounds.
    assert rel_err(c, gemm.reference(a.float().numpy(), b.float().numpy())) < 1e-5


@pytest.mark.parametrize("variant", [
    dict(INSTR=tp.nv.mma_m16n8k16_bf16, WARPS=(1, 4), BM=32, BN=64, BK=32, STAGES=3),
    dict(INSTR=tp.nv.mma_m16n8k16_bf16, WARPS=(2, 2), BM=64, BN=64, BK=64, STAGES=4,
         SWIZZLE_A=tp.Swizzle(3, 3, 3)),
    dict(INSTR=tp.amd.mfma_f32_16x16x16_bf16, WARPS=(2, 2), BM=32, BN=32, BK=32, STAGES=2, target="gfx942"),
    dict(INSTR=tp.nv.wgmma_m64n128k16_bf16, WARPS=(1, 1), BM=64, BN=128, BK=64, STAGES=3,
         SWIZZLE_A=tp.Swizzle(3, 3, 3), target="sm_90a"),
])
def test_gemm_policies_change_speed_not_results(variant):
    variant = dict(variant)
    target = variant.pop("target", "sm_80")
    a = torch.randn(97, 130).to(torch.bfloat16)
    b = torch.randn(130, 75).to(torch.bfloat16)
    c = torch.full((97, 75), float("nan"))
    gemm.launch(a, b, c, target=target, **variant)
    assert rel_err(c, gemm.reference(a.float().numpy(), b.float().numpy())) < 1e-5


def test_gemm_shared_staging_is_swizzled_and_pipelined():
    """The recorded shared writes of the GEMM go through the swizzle, and async copies land a stage ahead."""
    a = torch.randn(64, 96).to(torch.bfloat16)
    b = torch.randn(96, 64).to(torch.bfloat16)
    c = torch.empty(64, 64)
    params = {**gemm.PRESETS["sm_80"], "STAGES": 3}
    trace = gemm.gemm[(1, 1)](a, b, c, record=True, target="sm_80", **params)
    acc = trace.accesses
    shared_writes = acc[(acc["space"] == 1) & acc["write"]]
    assert len(shared_writes) > 0
    # with 3 stages, a tile issued after iteration k's barrier lands at iteration k + 2's wait, an interval later
    assert (shared_writes["interval_end"] >= shared_writes["interval"]).all()
    assert (shared_writes["interval_end"] > shared_writes["interval"]).any()
    # the A tile (BM x BK = 64 x 32) stage 0 occupies offsets 0..2047 and its swizzle permutes them: the first
    # chunk of row 2 lands in physical chunk (2 >> 1) & 3 = 1 of its row
    row2 = shared_writes[(shared_writes["buffer"] == 0) & (shared_writes["offset"] // 32 == 2)
                         & (shared_writes["offset"] < 2048)]
    assert set((row2["offset"] % 32) // 8) == {0, 1, 2, 3}
