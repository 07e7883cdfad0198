"""G33: gemm_splitk_swap K_WAYS=2 (two consumer warpgroups over one 128 x 64 tile of C, alternate k-tiles) in
thread-block clusters on a real GPU, through `gemm_hopper.launch` with the constexprs given: 1x2 clusters of adjacent
column tiles sharing A's tile by multicast (CLUSTER_N, cuBLAS's nvjet 128x64_64x8_1x2) and 2x1 clusters of row tiles
sharing B's (CLUSTER_M), each with the relaxed coupling (RELAXED=1: a relaxed opening cluster barrier, the producer's
tail in place of the closing one) and the full cluster barriers. Ragged shapes: a column count whose tiles are odd (the
grid rounded up to whole clusters: one block wholly past N), one k-tile (one pair, ring 1 reading zeros), B's rows
padded. Every output is poisoned with NaN first and checked against float64 within cuBLAS's own error (x 1.5) and the
other GEMM GPU tests' bar; repeated calls give the same bits. SASS: HGMMA, the multicast copy, no local memory, and no
MEMBAR.ALL.GPU where relaxed. Skips without a GPU."""

from __future__ import annotations

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

import tilepy as tp  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")

KW = dict(SWAP_AB=1, K_WAYS=2, CONSUMERS=2, IN_FLIGHT=1, SPLIT_K=1, STAGES=4, BM=128, BN=64,
          INSTR=tp.nv.wgmma_m64n128k16_bf16)
FORMS = {"cn2_rel": dict(KW, CLUSTER_N=2, RELAXED=1), "cn2": dict(KW, CLUSTER_N=2),
         "cn2_rel_w0": dict(KW, CLUSTER_N=2, RELAXED=1, IN_FLIGHT=0), "cn4_rel": dict(KW, CLUSTER_N=4, RELAXED=1),
         "cm2_rel": dict(KW, CLUSTER_M=2, RELAXED=1)}


@pytest.mark.parametrize("out", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("m,n,k", [(1024, 1024, 1024), (1024, 1024, 4096), (900, 900, 520), (130, 264, 64),
                                   (300, 1001, 200)])
def test_kways_cluster_forms(m, n, k, form, out):
    o = tp.bf16 if out == torch.bfloat16 else tp.f32
    p = FORMS[form]
    kernel, kp = gemm_hopper.plan_kernel(m, n, o, p, k)
    assert kernel.name == "gemm_splitk_swap" and kp["K_WAYS"] == 2, (kernel.name, kp)
    g = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = torch.randn(m, k, device=DEV, generator=g).bfloat16()
    b = torch.randn(k, n, device=DEV, generator=g).bfloat16()
    ref = a.double() @ b.double()
    peer = torch.matmul(a, b) if out == torch.bfloat16 else (a.float() @ b.float())
    peer_err = float((peer.double() - ref).norm() / ref.norm())
    c = torch.full((m, n), float("nan"), device=DEV, dtype=out)
    gemm_hopper.launch(a, b, c, **p)
    torch.cuda.synchronize()
    assert torch.isfinite(c).all()
    err = float((c.double() - ref).norm() / ref.norm())
    assert err < (3e-3 if out == torch.bfloat16 else 1e-5), err
    if out == torch.bfloat16:
        assert err <= 1.5 * peer_err, (err, peer_err)
    first = c.clone()
    for _ in range(3):                  # the same bits every call (the tail leaves no block behind)
        c.fill_(float("nan"))
        gemm_hopper.launch(a, b, c, **p)
    torch.cuda.synchronize()
    assert torch.equal(c, first)


@pytest.mark.parametrize("form", list(FORMS))
def test_kways_cluster_sass(form):
    import tilepy_hip

    p = FORMS[form]
    for o in (tp.f32, tp.bf16):
        kernel, kp = gemm_hopper.plan_kernel(1024, 1024, o, p, 1024)
        ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
        sass = ck.sass()
        assert "HGMMA.64x128x16.F32.BF16" in sass and "UTMALDG.2D.MULTICAST" in sass
        assert "LDL" not in sass and "STL" not in sass
        assert ck.resources.get("spill_stores", 0) == 0
        assert ("MEMBAR.ALL.GPU" in sass) == (not p.get("RELAXED"))
