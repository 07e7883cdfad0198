"""The fp8 GEMM's small / mid forms (G28; stdlib_kernels/gemm_fp8.py) on the CPU interpreter against float64 of the
e4m3 inputs: 64 x 128 / 64 x 64 / 128 x 128 tiles with one wgmma group in flight or none and the TMA-store epilogue,
rings that turn over (more k-tiles than stages) and that are never filled (fewer), ragged M, N and K; each form
verifies clean with tilepy-verify."""

import time

import numpy as np
import pytest

import tilepy as tp
from stdlib_kernels import gemm_fp8
from tilepy.dtypes import round_bf16, round_e4m3

I128, I64 = tp.nv.wgmma_m64n128k32_e4m3, tp.nv.wgmma_m64n64k32_e4m3
BASE = dict(gemm_fp8.PRESETS["sm_90a"], PRODUCER_REGS=0, CONSUMER_REGS=0, GROUP_M=8)
FORMS = {   # (the forms of benchmarks/gemm_fp8_small.py; stages cut where the interpreter needs the ring to turn)
    "64x128_w1": dict(BM=64, BN=128, STAGES=3, CONSUMERS=1, INSTR=I128, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1),
    "64x128_w0": dict(BM=64, BN=128, STAGES=3, CONSUMERS=1, INSTR=I128, IN_FLIGHT=0, EPILOGUE=2, TMA_ONLY=1),
    "64x64_w1": dict(BM=64, BN=64, STAGES=2, CONSUMERS=1, INSTR=I64, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1),
    "128x128_w1": dict(BM=128, BN=128, STAGES=2, CONSUMERS=2, INSTR=I128, IN_FLIGHT=1, EPILOGUE=2, TMA_ONLY=1),
    "128x128_w0_s6": dict(BM=128, BN=128, STAGES=6, CONSUMERS=2, INSTR=I128, IN_FLIGHT=0, EPILOGUE=2, TMA_ONLY=1),
}


def _inputs(M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    a = round_e4m3(rng.standard_normal((M, K)).astype(np.float32) * 3)
    b = round_e4m3(rng.standard_normal((N, K)).astype(np.float32) * 3)
    sa = np.array([rng.uniform(0.01, 0.1)], np.float32)
    sb = np.array([rng.uniform(0.5, 2.0)], np.float32)
    return a, b, sa, sb


def _check(out, a, b, sa, sb):
    ref = gemm_fp8.reference(a, b, sa, sb)
    mag = (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)).T) * float(sa[0]) * float(sb[0])
    bound = 2.0**-8 * np.abs(ref) + 1e-5 * mag + 1e-30
    assert not np.isnan(out).any()
    assert np.array_equal(out, round_bf16(out))
    worst = np.abs(out.astype(np.float64) - ref) - bound
    assert worst.max() <= 0, f"error over the bound by {worst.max()} at {np.unravel_index(worst.argmax(), ref.shape)}"


@pytest.mark.parametrize("name", list(FORMS))
@pytest.mark.parametrize("shape", [(200, 300, 1040), (70, 136, 64)], ids=["turns", "one_k_tile"])
def test_small_forms_against_float64(name, shape):
    M, N, K = shape
    p = {**BASE, **FORMS[name]}
    a, b, sa, sb = _inputs(M, N, K, seed=M + N + K)
    out = np.full((M, N), np.nan, np.float32)
    kernel, kp = gemm_fp8.kernel_of(p)
    kernel[gemm_fp8.grid_of(M, N, p)](a, b, sa, sb, out, target="sm_90a", **kp)
    _check(out, a, b, sa, sb)


@pytest.mark.parametrize("name", list(FORMS))
def test_small_forms_verify_clean(name):
    import tilepy_verify as tv

    p = {**BASE, **FORMS[name], "STAGES": 8 if FORMS[name]["BM"] == 64 else 6}     # the timed depths
    kernel, kp = gemm_fp8.kernel_of(p)
    t = time.process_time()
    report = tv.verify(kernel, target="sm_90a", **kp)
    assert report.ok and not report.findings, str(report)
    assert time.process_time() - t < 2.0
