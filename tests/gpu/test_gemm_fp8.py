"""e4m3 and the scaled fp8 GEMM (stdlib_kernels/gemm_fp8.py) on a real GPU: the hardware's conversions
(cvt.rn.satfinite.e4m3x2.f32, cvt.rn.f16x2.e4m3x2) against the interpreter's rounding, and the GEMM against
float64 of the e4m3 inputs and next to torch._scaled_mm(a, b.t(), scale_a, scale_b, out_dtype=bf16) on the same
inputs, over every class of the policy table and ragged shapes. Outputs are poisoned with NaN first. Skips
without a GPU."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tilepy"))

from test_e4m3 import _casts, _random_inputs  # noqa: E402

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp8  # noqa: E402
from tilepy import dtypes as dt  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")


def test_hardware_conversions_match_the_interpreter():
    x = np.concatenate([_random_inputs(20000, seed=11), dt.e4m3_from_bits(np.arange(256, dtype=np.uint8)),
                        [np.inf, -np.inf, np.nan, 1e30, -1e-30]]).astype(np.float32)
    n = x.size
    y = torch.zeros(n, dtype=torch.float8_e4m3fn, device=DEV)
    z = torch.full((n,), float("nan"), device=DEV)
    w = torch.full((n,), float("nan"), device=DEV)
    tilepy_hip.launch(_casts, (tp.cdiv(n, 256),), torch.from_numpy(x).to(DEV), y, z, w, target="sm_90a")
    torch.cuda.synchronize()
    want = dt.round_e4m3(x)
    got_bits = y.view(torch.uint8).cpu().numpy()
    want_bits = dt.e4m3_to_bits(want)
    nan = np.isnan(want)
    bad = np.flatnonzero((got_bits != want_bits) & ~nan)
    assert bad.size == 0, [(float(x[i]), hex(got_bits[i]), hex(want_bits[i])) for i in bad[:10]]
    assert np.all(got_bits[nan] & 0x7F == 0x7F)                      # NaN (the hardware's sign of it)
    np.testing.assert_array_equal(z.cpu().numpy(), want)
    np.testing.assert_array_equal(w.cpu().numpy(), dt.round_e4m3(dt.round_bf16(x)) * 2)


def _quantize(x):
    """Per-tensor scaling as a user does it: e4m3 values x / scale with amax at 448, and the scale."""
    scale = (x.abs().max().float() / 448.0).clamp(min=1e-12)
    return (x / scale).to(torch.float8_e4m3fn), scale.reshape(1)


def _rel(x, ref):
    x = x.double()
    assert torch.isfinite(x).all(), "NaN/inf in the output (an element not written?)"
    return float((x - ref).norm() / ref.norm())


SHAPES = [(128, 4096, 4096), (1000, 1000, 1024), (2051, 2045, 1008), (257, 300, 528), (64, 64, 16),
          (4096, 4096, 4096), (300, 130, 400)]


TMA_REGS = dict(STAGES=3, EPILOGUE=2, PRODUCER_REGS=96, CONSUMER_REGS=200)   # TMA store + register budgets
PIECES = dict(PERSISTENT=1, STORE_N=64, STAGES=4, PRODUCER_REGS=96, CONSUMER_REGS=200)
CASES = [(shape, {}) for shape in SHAPES] + [((2051, 2045, 1008), dict(PERSISTENT=1)),
                                             ((4096, 4096, 4096), dict(PERSISTENT=1, GROUP_M=16)),
                                             # C's 4090-byte rows: the producer's copy instead of the TMA store
                                             ((2051, 2045, 1008), TMA_REGS),
                                             ((4096, 4096, 4096), dict(TMA_REGS, GROUP_M=16)),
                                             ((257, 300, 528), dict(STAGES=3, EPILOGUE=2)),
                                             ((1000, 1000, 1024), dict(TMA_REGS, IN_FLIGHT=1)),
                                             # gemm_fp8_persistent_tma (the store in 64-column pieces, a store
                                             # warp, 4 stages): ragged M and K, N a multiple of 8 (TMA rows)
                                             ((2051, 2040, 1008), dict(PIECES, NUM_SMS=37)),
                                             ((4096, 4096, 4096), dict(PIECES, GROUP_M=16)),
                                             ((257, 304, 528), dict(PIECES, NUM_SMS=3, PRODUCER_REGS=0,
                                                                    CONSUMER_REGS=0))]


@pytest.mark.parametrize("m,n,k,extra", [(*s, e) for s, e in CASES])
def test_gemm_fp8_against_float64_and_scaled_mm(m, n, k, extra):
    g = torch.Generator(device=DEV).manual_seed(m * 7 + n * 13 + k)
    a, sa = _quantize(torch.randn(m, k, device=DEV, generator=g))
    b, sb = _quantize(torch.randn(n, k, device=DEV, generator=g) * 0.02)
    out = torch.full((m, n), float("nan"), device=DEV, dtype=torch.bfloat16)
    gemm_fp8.launch(a, b, sa, sb, out, **extra)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double().t()) * sa.double() * sb.double()
    err = _rel(out, ref)
    # one bf16 rounding (unit roundoff 2^-8, ~2^-9.5 in norm) over the tensor cores' sum: fp8 wgmma accumulates
    # with fewer bits than f32 (no promotion to f32 adds here), which grows with K
    assert err <= 2.0**-8, err
    if m % 16 == 0 and n % 16 == 0 and k % 16 == 0:   # torch._scaled_mm takes multiples of 16 only
        fast = torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16, use_fast_accum=True)
        promoted = torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16)
        err_fast, err_promoted = _rel(fast, ref), _rel(promoted, ref)
        print(f"{m}x{n}x{k}: rel err ours {err:.3e}, _scaled_mm fast accum {err_fast:.3e}, promoted "
              f"{err_promoted:.3e}")
        # like for like: cuBLAS's fp8 without promotion; the promoted product is the floor (bf16 rounding only)
        assert err <= 1.5 * err_fast + 1e-5 and err <= 2.0 * err_promoted + 1e-5, (err, err_fast, err_promoted)
    # elementwise: half a bf16 ulp of the result plus a share of the sum of |products| (catches elements that are
    # garbage: unwritten, another tile's, misscaled; the norm above catches small systematic errors)
    mag = (a.double().abs() @ b.double().abs().t()) * sa.double() * sb.double()
    bound = 2.0**-8 * ref.abs() + 2.0**-9 * mag
    excess = (out.double() - ref).abs() - bound
    assert bool((excess <= 0).all()), (float(excess.max()), divmod(int(excess.argmax()), n))


def test_gemm_fp8_scalar_scales_and_refusals():
    a, sa = _quantize(torch.randn(96, 64, device=DEV))
    b, sb = _quantize(torch.randn(80, 64, device=DEV))
    out = torch.full((96, 80), float("nan"), device=DEV, dtype=torch.bfloat16)
    gemm_fp8.launch(a, b, sa.reshape(()), sb.reshape(()), out)            # 0-d scales as well
    ref = (a.double() @ b.double().t()) * sa.double() * sb.double()
    assert _rel(out, ref) <= 2.0**-8
    with pytest.raises(ValueError, match="multiple of 16"):
        gemm_fp8.launch(a[:, :40].contiguous(), b[:, :40].contiguous(), sa, sb, out)
    with pytest.raises(ValueError, match="float8_e4m3fn"):
        gemm_fp8.launch(a.bfloat16(), b, sa, sb, out)


def test_sass_of_the_persistent_tma_pieces():
    """gemm_fp8_persistent_tma at 96 / 200: QGMMA e4m3, four TMA stores a tile, setmaxnreg, no local memory."""
    import re

    kernel, kp = gemm_fp8.kernel_of(gemm_fp8.params_for(4096, 4096, 4096, **PIECES))
    assert kernel is gemm_fp8.gemm_fp8_persistent_tma
    ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
    sass = ck.sass()
    assert "QGMMA.64x256x32.F32.E4M3.E4M3" in sass and sass.count("UTMASTG") >= 4 and "USETMAXREG" in sass
    assert not re.findall(r"\b(?:LDL|STL)\b", sass), ck.resources
