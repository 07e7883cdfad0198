"""G31: gemm_hopper.launch's TMA_ONLY=1 forms (gemm_hopper / gemm_splitk / gemm_cluster, the operands' copies without
the per-element fallback) on a real GPU, at the shapes whose policy they are and on ragged ones, against float64
(computed on the GPU) within cuBLAS's own error on the same inputs (x 1.5); and launch on an operand whose base is
2 bytes off 16 (a view into a larger buffer): the policy's form with the fallback (TMA_ONLY dropped), the same answer.
(gemm_cluster's B multicast is TMA only whatever TMA_ONLY says: launch takes the unclustered form there.) SASS of the
TMA_ONLY forms: HGMMA, no local memory. Skips without a GPU."""

from __future__ import annotations

import re

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

import tilepy as tp  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")

# (the shape whose policy is the form, the shape it runs at)
CASES = [((512, 512, 512), (512, 512, 512)),          # 64 x 64 (f32) / the relaxed 64 x 64 cluster (bf16)
         ((768, 768, 768), (700, 770, 760)),          # 64 x 128, 8 stages, TMA store (bf16)
         ((1024, 1024, 1024), (1000, 1000, 1030)),    # 64 x 128 in relaxed clusters
         ((200, 2048, 4096), (200, 2048, 4096)),      # 64 x 128 split 2, FIXUP=3
         ((16, 14336, 4096), (16, 14336, 4096)),      # 64 x 128 unsplit, 112 column tiles
         ((2051, 2045, 1000), (2051, 2045, 1000)),    # 128 x 256, B's rows padded
         ((3000, 5000, 4096), (1000, 1300, 4096))]    # 128 x 256 in clusters of 2 (bf16) / 4 (f32)


def _operands(m, n, k, offset: int, seed: int):
    """a (m, k), b (k, n) bf16 on the GPU; offset 1: each a view 2 bytes into a larger buffer (base off 16 bytes)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m * k + 8, device=DEV, generator=g).bfloat16()[offset:offset + m * k].view(m, k)
    b = torch.randn(k * n + 8, device=DEV, generator=g).bfloat16()[offset:offset + k * n].view(k, n)
    return a, b


def _check(a, b, c, out):
    """The bar of the other GEMM GPU tests (tests/gpu/test_gpu_gemm_small_class.py): against float64, and for bf16 out
    within 1.5x cuBLAS's error on the same values (aligned copies: cuBLAS takes other kernels for an offset base)."""
    ref = a.double() @ b.double()
    err = float((c.double() - ref).norm() / ref.norm())
    assert torch.isfinite(c).all()
    assert err < (3e-3 if out == torch.bfloat16 else 1e-5), err
    if out == torch.bfloat16:           # one rounding of the f32 sum, as cuBLAS's
        peer = torch.matmul(a.clone(), b.clone()).double()
        assert err <= 1.5 * float((peer - ref).norm() / ref.norm()), err


@pytest.mark.parametrize("out", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("offset", [0, 1])
@pytest.mark.parametrize("policy_shape,shape", CASES)
def test_policy_forms(policy_shape, shape, offset, out):
    m, n, k = shape
    o = tp.f32 if out == torch.float32 else tp.bf16
    p = gemm_hopper.policy(*policy_shape, o, fixup=True)
    assert p.get("TMA_ONLY", 0) == (0 if gemm_hopper._fallback_kept(p) else 1)    # (1024^3 bf16: the fallback kept)
    a, b = _operands(m, n, k, offset, m + n + k)
    if offset:
        assert not gemm_hopper._tma_loadable(a, b)
    # the form at a ragged shape (its constexprs given, TMA_ONLY=1 among them), or the policy itself as callers get it
    # (for the offset views: launch drops TMA_ONLY, and takes the unclustered form for gemm_cluster's TMA-only B)
    given = p if policy_shape != shape and not offset else {}
    for _ in range(2):      # twice through one plan
        c = torch.full((m, n), float("nan"), device=DEV, dtype=out)
        gemm_hopper.launch(a, b, c, **given)
        torch.cuda.synchronize()
        _check(a, b, c, out)


@pytest.mark.parametrize("policy_shape", [s for s, _ in CASES])
def test_sass(policy_shape):
    import tilepy_hip

    for o in (tp.f32, tp.bf16):
        p = gemm_hopper.policy(*policy_shape, o, fixup=True)
        kernel, kp = gemm_hopper.plan_kernel(policy_shape[0], policy_shape[1], o, p, policy_shape[2])
        ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
        sass = ck.sass()
        assert re.search(r"\bHGMMA\.", sass)
        assert not re.search(r"\b(LDL|STL)\b", sass), policy_shape
