"""Shared -> global copies into rows off 16 bytes (tilepy_hip/render/copies.py `_store_rows_realigned`): each row's
aligned body in 16-byte stores gathered from two shared chunks, its head and tail by element. Every width, base
offset and first column against the source, exact, and nothing outside the window written (sentinels before and
after the output). Skips without a GPU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hip"))

import kernels as extra  # noqa: E402

pytestmark = pytest.mark.gpu


def _output(M, N, dtype, shift):
    """A contiguous (M, N) tensor starting `shift` elements into a buffer of sentinels (a base off 16 bytes)."""
    buf = torch.full((M * N + shift + 64,), 7, dtype=torch.float32, device="cuda").to(dtype)
    return buf, buf[shift:shift + M * N].view(M, N)


def _run(kernel, M, N, dtype, shift, BM, BN, C0, **kw):
    x = torch.randn(M, N, device="cuda").to(dtype)
    buf, y = _output(M, N, dtype, shift)
    kernel[(-(-M // BM), -(-(N - C0) // BN))](x, y, target="sm_90a", BM=BM, BN=BN, C0=C0, **kw)
    torch.cuda.synchronize()
    bits = (lambda t: t.view(torch.uint8)) if dtype == torch.float8_e4m3fn else (lambda t: t)
    sentinel = torch.full((1,), 7, dtype=torch.float32, device="cuda").to(dtype)
    assert torch.equal(bits(y[:, C0:]), bits(x[:, C0:]))
    assert torch.equal(bits(y[:, :C0]), bits(sentinel.expand(M, C0)))
    assert torch.equal(bits(buf[:shift]), bits(sentinel.expand(shift)))
    assert torch.equal(bits(buf[shift + M * N:]), bits(sentinel.expand(64)))


@pytest.mark.parametrize("swizzled", [1, 0])
@pytest.mark.parametrize("N,shift,C0", [(2045, 0, 0), (2045, 3, 0), (2043, 1, 5), (250, 0, 3), (256, 1, 0),
                                        (256, 0, 8), (97, 7, 0)])
def test_bf16_rows(N, shift, C0, swizzled):
    _run(extra.rows_out_bf16, 67, N, torch.bfloat16, shift, 32, 64, C0, SWIZZLED=swizzled)


@pytest.mark.parametrize("N,shift,C0", [(1021, 0, 0), (1021, 1, 2), (130, 3, 1), (128, 2, 0)])
def test_f32_rows(N, shift, C0):
    _run(extra.rows_out_f32, 45, N, torch.float32, shift, 32, 64, C0)


@pytest.mark.parametrize("N,shift,C0", [(1001, 0, 0), (1001, 5, 3), (4090, 15, 0), (256, 9, 7)])
def test_e4m3_rows(N, shift, C0):
    _run(extra.rows_out_e4m3, 33, N, torch.float8_e4m3fn, shift, 32, 64, C0)

