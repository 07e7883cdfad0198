"""Resource estimates and kernels built from source text."""

import numpy as np
import pytest

import tilepy as tp
from stdlib_kernels import gemm


def test_estimate_counts_shared_threads_and_registers():
    kir = gemm.gemm.ir(target="sm_80", **gemm.PRESETS["sm_80"])
    r = tp.estimate_resources(kir)
    assert r.threads == 128 and r.shared_bytes == kir.shared_bytes == 2 * (64 * 32 + 32 * 64) * 2
    # the 64x64 f32 accumulator over 128 threads is 32 registers per thread, plus the base
    assert r.registers >= 32 + 24 and r.fits


def test_estimate_rejects_what_does_not_fit():
    params = {**gemm.PRESETS["gfx942"], "BM": 128, "BN": 128, "BK": 64, "STAGES": 4}
    with pytest.raises(tp.ResourceError):  # 4 stages of 128x64 + 64x128 bf16 = 128 KB > 64 KB of LDS
        gemm.gemm.ir(target="gfx942", **params)

    @tp.kernel(threads=32)
    def two_big_tiles(X: tp.Tensor[tp.f32, "M", "N"]):
        a = tp.load(X[0:64, 0:64])  # 4096 / 32 = 128 registers per thread
        b = tp.load(X[64:128, 0:64])  # another 128: each fits alone, not together
        tp.store(X[0:64, 0:64], a + b)

    r = tp.estimate_resources(two_big_tiles.ir())
    assert r.registers >= 256 + 24
    assert not r.fits and any("registers per thread" in why for why in r.reasons)


SOURCE = '''
import tilepy as tp

@tp.kernel(threads=32)
def double(X: tp.Tensor[tp.f32, "N"], BLOCK: tp.constexpr = 64):
    i0 = tp.block_id(0) * BLOCK
    tp.store(X[i0:i0 + BLOCK], tp.load(X[i0:i0 + BLOCK]) * 2.0)

@tp.kernel(threads=32)
def broken(X: tp.Tensor[tp.f32, "N"]):
    while True:
        pass
'''


def test_kernels_from_source_run_and_report_lines():
    kernels = tp.kernels_from_source(SOURCE, "<generated:candidate-1>")
    assert set(kernels) == {"double", "broken"}
    x = np.arange(100, dtype=np.float32)
    kernels["double"][(2,)](x)
    np.testing.assert_array_equal(x, np.arange(100) * 2)
    with pytest.raises(tp.UnsupportedConstructError) as e:
        kernels["broken"].ir()
    assert e.value.span.file == "<generated:candidate-1>" and e.value.span.line == 11
    assert "while True:" in str(e.value)


def test_estimate_ignores_verification_only_ops_and_tracks_the_compiled_figure():
    from stdlib_kernels import gemm_hopper

    r = tp.estimate_resources(gemm_hopper.gemm_hopper.ir("sm_90a", **gemm_hopper.PRESETS["sm_90a"]))
    # the consumer's 128x256 f32 accumulator over 256 threads is 128 registers; ptxas reports 157 in all
    assert 128 + 24 <= r.registers <= 200 and r.fits
