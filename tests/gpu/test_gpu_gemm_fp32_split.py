"""B's transposed split on a real GPU (G38): split_tf32_tw ((32, 128) tiles of a "kn" B transposed in registers) writes
split_tf32_t's halves bit for bit -- ragged K and N, N not a multiple of 4 (X's rows off 16 bytes: the loads' scalar
path), a base 4 bytes off 16, a batch --; gemm_fp32.launch through it against float64 next to cuBLAS SGEMM's error;
its SASS has no local memory and no shared memory. Skips without a GPU."""

from __future__ import annotations

import re

import numpy as np
import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp32  # noqa: E402
from tilepy.instructions import round_tf32  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")


def _rel(x, ref):
    return float((x.double() - ref).norm() / ref.norm())


def _x(shape, g, offset):
    n = 1
    for d in shape:
        n *= d
    base = torch.randn(n + (1 if offset else 0), device=DEV, generator=g)
    return (base[1:] if offset else base).view(*shape)


@pytest.mark.parametrize("offset", [False, True])
@pytest.mark.parametrize("z,k,n", [(1, 1024, 1024), (1, 1000, 2045), (2, 70, 45), (1, 33, 130), (3, 257, 300),
                                   (1, 4096, 4096)])
def test_split_tw_is_split_t_bit_for_bit(z, k, n, offset):
    g = torch.Generator(device=DEV).manual_seed(z + k + n + offset)
    x = _x((z, k, n), g, offset)
    kp = -(-k // 4) * 4
    h0, l0, h1, l1 = (torch.full((z, n, kp), float("nan"), device=DEV) for _ in range(4))
    gemm_fp32.split_tf32_t[(-(-kp // 32), -(-n // 32), z)](x, h0, l0)
    gemm_fp32.split_tf32_tw[(-(-kp // 32), -(-n // 128), z)](x, h1, l1)
    torch.cuda.synchronize()
    assert torch.equal(h1, h0) and torch.equal(l1, l0)
    assert not h1[..., k:].any() and not l1[..., k:].any()
    xt = x.transpose(1, 2).cpu().numpy()
    assert np.array_equal(h1[..., :k].cpu().numpy(), round_tf32(xt))
    assert np.array_equal(l1[..., :k].cpu().numpy(), round_tf32(xt - round_tf32(xt)))


@pytest.mark.parametrize("m,n,k", [(1024, 1024, 1024), (2051, 2045, 1000), (1000, 1001, 1002), (300, 130, 70)])
def test_launch_kn_through_the_wide_split_is_the_same_product(monkeypatch, m, n, k):
    """launch with KN_SPLIT_WIDE gives the bits of launch without it (the halves are the same), and that product's
    error against float64 is within SGEMM's (or within 2^-22, 3xTF32's own floor, where a short K makes SGEMM's
    smaller: 300 x 130 x 70)."""
    g = torch.Generator(device=DEV).manual_seed(m + n + k)
    a = torch.randn(m, k, device=DEV, generator=g)
    b = torch.randn(k, n, device=DEV, generator=g)
    c0, c1 = (torch.full((m, n), float("nan"), device=DEV) for _ in range(2))
    gemm_fp32.launch(a, b, c0, SWAP=0)
    monkeypatch.setattr(gemm_fp32, "KN_SPLIT_WIDE", True)
    gemm_fp32.launch(a, b, c1, SWAP=0)
    torch.cuda.synchronize()
    assert torch.equal(c0, c1)
    torch.backends.cuda.matmul.allow_tf32 = False
    ref = a.double() @ b.double()
    err, err_sgemm = _rel(c1, ref), _rel(a @ b, ref)
    assert err <= err_sgemm or err <= 2.0**-22, (err, err_sgemm)


def test_sass_of_the_wide_split():
    ck = tilepy_hip.compile(gemm_fp32.split_tf32_tw, target="sm_90a")
    sass = ck.sass()
    assert not re.findall(r"\b(?:LDL|STL|LDS|STS)\b", sass), ck.resources
    assert re.findall(r"\bSTG\.E\.128\b", sass), "X.T is written 16 bytes a vector"
