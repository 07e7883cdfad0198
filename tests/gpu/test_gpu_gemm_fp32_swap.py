"""gemm_fp32's swap-AB form (out = x @ W.T for few rows of x: gemm_fp32_ct with the weight read as it is and split
in registers, the transposed store) on a real GPU: its error against float64 next to cuBLAS SGEMM's (F.linear f32,
TF32 off) on the same inputs, over the table's column tiles (16-128 rows), ragged shapes, split-K by the policy and
the decode shapes at full size; the unswapped form (SWAP=0) on the same inputs agrees. The same for a (K, N) B
(gemm_fp32_kt: B read M-major, loaded transposed into the register fragments; torch.matmul f32 the peer). Outputs are
poisoned with NaN first. Skips without a GPU."""

from __future__ import annotations

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

from stdlib_kernels import gemm_fp32  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")


def _rel(x, ref):
    return float((x.double() - ref).norm() / ref.norm())


@pytest.mark.parametrize("m,n,k", [(16, 4096, 4096), (128, 4096, 4096), (64, 14336, 4096), (256, 1000, 2048),
                                   (7, 300, 516), (40, 130, 1000), (100, 3000, 2000)])
def test_swap_error_no_worse_than_sgemm(m, n, k):
    g = torch.Generator(device=DEV).manual_seed(m * 7 + n * 13 + k)
    x = torch.randn(m, k, device=DEV, generator=g)
    w = torch.randn(n, k, device=DEV, generator=g)
    assert gemm_fp32.swap_ok(x, w, "nk", {})
    c = torch.full((m, n), float("nan"), device=DEV)
    gemm_fp32.launch(x, w, c, b_layout="nk")
    c0 = torch.full((m, n), float("nan"), device=DEV)
    gemm_fp32.launch(x, w, c0, b_layout="nk", SWAP=0)
    torch.cuda.synchronize()
    ref = x.double() @ w.double().t()
    torch.backends.cuda.matmul.allow_tf32 = False
    err, err0, err_sgemm = _rel(c, ref), _rel(c0, ref), _rel(torch.nn.functional.linear(x, w), ref)
    # as test_gpu_gemm_fp32: from K ~ 1000 on the promoted 3xTF32 sum beats SGEMM; below, the split's own floor
    assert err <= 1.25 * err_sgemm or err <= 2.0**-22, (err, err_sgemm)
    if k >= 1000:
        assert err <= err_sgemm, (err, err_sgemm)
    assert err <= 1.5 * err0 + 2.0**-24, (err, err0)      # the same three products, in another order


@pytest.mark.parametrize("form", [1, 2])
@pytest.mark.parametrize("m,n,k,extra", [(16, 4096, 4096, {}), (128, 4096, 4096, {}), (64, 14336, 4096, {}),
                                         (256, 1000, 2048, {}), (7, 300, 518, {}), (40, 132, 1000, {}),
                                         (100, 3000, 2002, {}), (1024, 1024, 1024, dict(SWAP=1)),
                                         (33, 520, 777, dict(SWAP=1, KSPLIT=3, STAGES=2))])
def test_swap_kn_error_no_worse_than_sgemm(monkeypatch, m, n, k, extra, form):
    monkeypatch.setattr(gemm_fp32, "KN_FORM", form)     # B's staged tile: 1 swizzled 32-column blocks, 2 row-major
    g = torch.Generator(device=DEV).manual_seed(m * 5 + n * 11 + k)
    x = torch.randn(m, k, device=DEV, generator=g)
    b = torch.randn(k, n, device=DEV, generator=g)
    assert gemm_fp32.swap_ok(x, b, "kn", extra)
    c = torch.full((m, n), float("nan"), device=DEV)
    gemm_fp32.launch(x, b, c, b_layout="kn", **extra)
    c0 = torch.full((m, n), float("nan"), device=DEV)
    gemm_fp32.launch(x, b, c0, b_layout="kn", SWAP=0)
    torch.cuda.synchronize()
    ref = x.double() @ b.double()
    torch.backends.cuda.matmul.allow_tf32 = False
    err, err0, err_sgemm = _rel(c, ref), _rel(c0, ref), _rel(torch.matmul(x, b), ref)
    assert err <= 1.25 * err_sgemm or err <= 2.0**-22, (err, err_sgemm)
    if k >= 1000:
        assert err <= err_sgemm, (err, err_sgemm)
    assert err <= 1.5 * err0 + 2.0**-24, (err, err0)
