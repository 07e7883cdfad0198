"""gemm_fp32 through `launch` under G36's policy on a real GPU: launch_policy's 128 x 96 tiles where their waves are
fuller (2051 x 2045 x 1000, 1536^3, 1600^3), 128 x 64 tiles (1024^3, 1000^3, 768^3) and 64 x 64 one-consumer tiles
(SMALL_64: a short K under half a wave of 128 x 64 tiles, 512^3, 640^3), all with TMA_ONLY copies, and the swap forms
(kn and nk) with TMA_ONLY and register budgets at 128 columns; each against float64 next to cuBLAS SGEMM's error on the
same inputs (NaN-poisoned outputs). An operand whose base a tensor map cannot take (a view 4 bytes off 16) runs the
form with the copies' fallback, as accurate. SASS of the policy's forms: HGMMA, no local memory. Skips without a GPU."""

from __future__ import annotations

import re

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp32  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")


def _rel(x, ref):
    return float((x.double() - ref).norm() / ref.norm())


def _offset(shape, g):
    """A contiguous tensor of `shape` whose base is 4 bytes past a 16-byte boundary."""
    n = 1
    for d in shape:
        n *= d
    return torch.randn(n + 1, device=DEV, generator=g)[1:].view(*shape)


def _spy(monkeypatch):
    seen = []
    real = gemm_fp32.launch_split
    monkeypatch.setattr(gemm_fp32, "launch_split", lambda *a, **k: seen.append(k) or real(*a, **k))
    return seen


@pytest.mark.parametrize("offset", [False, True])
@pytest.mark.parametrize("m,n,k,bn", [(2051, 2045, 1000, 96), (1536, 1536, 1536, 96), (1600, 1600, 1600, 96),
                                      (1024, 1024, 1024, 64), (1000, 1000, 1000, 64), (768, 768, 768, 64),
                                      (512, 512, 512, 64), (640, 640, 600, 64)])
def test_launch_policy_forms_error_no_worse_than_sgemm(monkeypatch, m, n, k, bn, offset):
    assert gemm_fp32.SMS == 132 and gemm_fp32.launch_policy(m, n, k)["BN"] == bn
    seen = _spy(monkeypatch)
    g = torch.Generator(device=DEV).manual_seed(m + n + k + offset)
    a = _offset((m, k), g) if offset else torch.randn(m, k, device=DEV, generator=g)
    b = torch.randn(k, n, device=DEV, generator=g)
    c = torch.full((m, n), float("nan"), device=DEV)
    gemm_fp32.launch(a, b, c)
    torch.cuda.synchronize()
    assert seen[-1]["BN"] == bn and bool(seen[-1].get("TMA_ONLY")) == (not offset), seen[-1]
    torch.backends.cuda.matmul.allow_tf32 = False
    ref = a.double() @ b.double()
    err, err_sgemm = _rel(c, ref), _rel(a @ b, ref)
    assert err <= err_sgemm, (err, err_sgemm)


@pytest.mark.parametrize("offset", [False, True])
@pytest.mark.parametrize("layout", ["kn", "nk"])
@pytest.mark.parametrize("m,n,k", [(128, 4096, 4096), (100, 1000, 1000), (256, 520, 2000), (16, 4096, 1024)])
def test_swap_tma_only_error_no_worse_than_sgemm(monkeypatch, m, n, k, offset, layout):
    seen = []
    real = gemm_fp32.launch_swap
    monkeypatch.setattr(gemm_fp32, "launch_swap", lambda *a, **kw: seen.append(kw) or real(*a, **kw))
    g = torch.Generator(device=DEV).manual_seed(m * 3 + n + k + offset)
    x = torch.randn(m, k, device=DEV, generator=g)
    shape = (k, n) if layout == "kn" else (n, k)
    b = _offset(shape, g) if offset else torch.randn(*shape, device=DEV, generator=g)
    c = torch.full((m, n), float("nan"), device=DEV)
    gemm_fp32.launch(x, b, c, b_layout=layout)
    torch.cuda.synchronize()
    assert seen, "a skinny product swaps"
    torch.backends.cuda.matmul.allow_tf32 = False
    bt = b if layout == "kn" else b.t()
    ref = x.double() @ bt.double()
    err, err_sgemm = _rel(c, ref), _rel(x @ bt, ref)
    assert err <= err_sgemm or err <= 2.0**-22, (err, err_sgemm)


def test_sass_of_the_policy_forms():
    """128 x 96 / 128 x 64 with TMA_ONLY and the kn swap's 128 columns with TMA_ONLY and register budgets: HGMMA .TF32
    with A from registers, no LDL / STL anywhere (the fallback's registers spilled 128 x 64 before G36)."""
    base = {**gemm_fp32.PRESETS["sm_90a"], **gemm_fp32.RAW}
    forms = [(gemm_fp32.gemm_fp32, {**base, **gemm_fp32.launch_policy(2051, 2045, 1000)}, "64x96x8"),
             (gemm_fp32.gemm_fp32, {**base, **gemm_fp32.launch_policy(1024, 1024, 1024)}, "64x64x8"),
             (gemm_fp32.gemm_fp32, {**base, **gemm_fp32.SMALL_64}, "64x64x8"),
             (gemm_fp32.gemm_fp32_ct, gemm_fp32.swap_params(128, 4096, 4096), "64x128x8"),
             (gemm_fp32.gemm_fp32_kt, gemm_fp32.swap_params(128, 4096, 4096, b_layout="kn"), "64x128x8")]
    for kernel, params, shape in forms:
        ck = tilepy_hip.compile(kernel, target="sm_90a", **params)
        sass = ck.sass()
        hgmma = re.findall(rf"HGMMA\.{shape}\.F32\.TF32[^;]*", sass)
        assert hgmma and all(re.search(r"TF32\S* R\d+, R\d+, gdesc", h) for h in hgmma), (shape, hgmma[:3])
        assert not re.findall(r"\b(?:LDL|STL)\b", sass), (shape, ck.resources)
