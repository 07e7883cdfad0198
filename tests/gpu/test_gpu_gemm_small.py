"""G8's policy forms on a real GPU, through `gemm_hopper.launch` as callers get them: swap-AB split-K for <= 32
decode rows (gemm_splitk_swap, FIXUP=3 slots + splitk_sum), 2x1 clusters (gemm_cluster) for 193-256 rows and for B
rows that are not whole 128-byte lines, 128 x 128 tiles for the mid-size shapes the large class used to split. Every
output is poisoned with NaN first and checked against float64 (computed on the GPU); a second call through the same
plan gives the same bits (no atomics in these forms). Skips without a GPU."""

from __future__ import annotations

import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
if not torch.cuda.is_available():
    pytest.skip(
        "no CUDA GPU here (torch.cuda.is_available() is False): GPU tests need the device machine",
        allow_module_level=True,
    )

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import tilepy as tp  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")


@pytest.mark.parametrize("out", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "m,n,k,form",
    [
        (16, 4096, 4096, "swap"),
        (13, 2045, 1000, "swap"),        # B's rows padded (4090 bytes), 16 k-tiles in 4 splits
        (1, 1024, 4096, "swap"),
        (32, 4096, 4096, "swap"),
        (20, 4096, 1100, "swap"),        # K not a multiple of BK
        (256, 4096, 4096, "cluster"),
        (240, 4096, 1000, "cluster"),    # 4 row tiles, the last one 48 rows
        (2048, 1024, 1024, "mid"),
        (1800, 1000, 1200, "mid"),     # ragged tiles in M and N
        (3000, 5000, 1000, "cluster"),   # B's rows 10000 bytes
    ],
)
def test_g8_policy_forms_through_launch(m, n, k, form, out):
    o = tp.bf16 if out == torch.bfloat16 else tp.f32
    p = gemm_hopper.policy(m, n, k, o, fixup=True)
    assert {"swap": bool(p.get("SWAP_AB")), "cluster": gemm_hopper.clustered(p),
            "mid": p["BN"] == 128 and p["BM"] == 128 and p.get("SPLIT_K", 1) == 1}[form], p
    g = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = torch.randn(m, k, device=DEV, generator=g).bfloat16()
    b = torch.randn(k, n, device=DEV, generator=g).bfloat16()
    ref = a.double() @ b.double()
    c = torch.full((m, n), float("nan"), device=DEV, dtype=out)
    gemm_hopper.launch(a, b, c)
    torch.cuda.synchronize()
    assert torch.isfinite(c).all()
    err = float((c.double() - ref).norm() / ref.norm())
    assert err < (3e-3 if out == torch.bfloat16 else 1e-5), err
    first = c.clone()
    c.fill_(float("nan"))
    gemm_hopper.launch(a, b, c)
    torch.cuda.synchronize()
    assert torch.equal(c, first)


def test_swap_ab_sass_and_registers():
    import tilepy_hip

    for out in (tp.f32, tp.bf16):
        p = gemm_hopper.policy(16, 4096, 4096, out, fixup=True)
        kernel, kp = gemm_hopper.plan_kernel(16, 4096, out, p, 4096)
        ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
        sass = ck.sass()
        assert kernel.name == "gemm_splitk_swap" and "HGMMA.64x16x16.F32.BF16" in sass and ".tnspA" in sass
        assert "LDL" not in sass and "STL" not in sass and ck.resources["spill_stores"] == 0
