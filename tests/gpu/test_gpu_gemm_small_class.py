"""G16's small-class rows of gemm_hopper's policy on a real GPU, through `gemm_hopper.launch` as callers get them:
64 x 64 tiles unsplit where the small class's 64 x 128 tiles fill at most half a wave (512^3 and ragged shapes),
the small class's 64 x 128 tiles unsplit for large shapes whose 128 x 256 tiles would split K (1024 x 1024 x 4096),
and the TMA store for the small class's bf16 output (C rows a tensor map can describe, and rows it cannot: N = 1001,
stored by the producer's copy). Every output is poisoned with NaN first and checked against float64 (computed on
the GPU) within cuBLAS's own error on the same inputs (x 1.5) and the bar of the other GEMM GPU tests; a second call
through the same plan gives the same bits (no atomics in these forms). SASS: HGMMA, no local memory. Skips without
a GPU."""

from __future__ import annotations

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

import tilepy as tp  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")


@pytest.mark.parametrize("out", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "m,n,k,form",
    [
        (512, 512, 512, "64x64"),
        (500, 520, 1000, "64x64"),       # ragged M / N, K not a multiple of BK (16 k-tiles)
        (300, 1001, 200, "64x64"),       # B's rows padded (2002 bytes), C's not a tensor map's
        (1024, 1024, 4096, "kw"),        # the large class on the small tiles, >= 32 k-tiles: K_WAYS 128 x 64 (G29)
        (1000, 1024, 4096, "kw"),        # ragged M: the last row tile part past M
        (512, 2048, 4096, "kw"),
        (1024, 1024, 2048, "kw"),        # 32 k-tiles: K_WAYS (from 32 k-tiles with its unsigned role index, G37)
        (1000, 1024, 3072, "kw"),        # 48 k-tiles, ragged M
        (1000, 1024, 3000, "64x128"),    # A's rows 6000 bytes, off 128-byte lines: the relaxed cluster (G33 call 4)
        (1000, 1000, 4096, "64x128"),    # B's rows off 128-byte lines: the relaxed cluster (G29 call 3)
        (2048, 512, 4096, "64x128"),     # more row tiles than column tiles: the relaxed cluster
        (1000, 1000, 4000, "64x128"),    # 63 k-tiles, B's rows off 128-byte lines: the relaxed cluster
        (1024, 1024, 1024, "64x128"),    # the small class's own tile: the TMA store for bf16 out
        (1000, 1001, 1000, "64x128"),    # C's rows 2002 bytes: the store falls back to the producer's copy
        (768, 768, 768, "64x128"),
    ],
)
def test_small_class_forms_through_launch(m, n, k, form, out):
    o = tp.bf16 if out == torch.bfloat16 else tp.f32
    p = gemm_hopper.policy(m, n, k, o, fixup=True)
    if form == "kw":
        assert (p["BM"], p["BN"], p.get("K_WAYS"), p.get("SWAP_AB"), p.get("SPLIT_K")) == (128, 64, 2, 1, 1), p
        assert gemm_hopper.plan_kernel(m, n, o, p, k)[0].name == "gemm_splitk_swap"
        _check_launch(m, n, k, out)
        return
    assert (p["BM"], p["BN"], p.get("SPLIT_K", 1)) == ((64, 64, 1) if form == "64x64" else (64, 128, 1)), p
    # G22: launch's bf16 64 x 64 and f32 64 x 128 (>= 16 k-tiles) forms are gemm_cluster RELAXED=1; G29: bf16 64 x 128
    # (>= 16 k-tiles) too
    clustered = (form == "64x64" and o == tp.bf16) or (form == "64x128" and -(-k // 64) >= 16)
    assert p.get("CLUSTER_M", 1) == (2 if clustered else 1) and p.get("RELAXED", 0) == int(clustered), p
    assert p.get("EPILOGUE", 0) == (2 if o == tp.bf16 else 0), p
    _check_launch(m, n, k, out)


def _check_launch(m, n, k, out):
    """launch (its own policy) against float64 and cuBLAS's error; the same bits twice."""
    g = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = torch.randn(m, k, device=DEV, generator=g).bfloat16()
    b = torch.randn(k, n, device=DEV, generator=g).bfloat16()
    ref = a.double() @ b.double()
    peer = torch.matmul(a, b) if out == torch.bfloat16 else (a.float() @ b.float())
    peer_err = float((peer.double() - ref).norm() / ref.norm())
    c = torch.full((m, n), float("nan"), device=DEV, dtype=out)
    gemm_hopper.launch(a, b, c)
    torch.cuda.synchronize()
    assert torch.isfinite(c).all()
    err = float((c.double() - ref).norm() / ref.norm())
    assert err < (3e-3 if out == torch.bfloat16 else 1e-5), err
    if out == torch.bfloat16:           # one rounding of the f32 sum, as cuBLAS's
        assert err <= 1.5 * peer_err, (err, peer_err)
    first = c.clone()
    c.fill_(float("nan"))
    gemm_hopper.launch(a, b, c)
    torch.cuda.synchronize()
    assert torch.equal(c, first)


@pytest.mark.parametrize("shape", [(512, 512, 512), (1024, 1024, 4096), (1024, 1024, 1024)])
def test_small_class_sass(shape):
    import tilepy_hip

    for out in (tp.f32, tp.bf16):
        p = gemm_hopper.policy(*shape, out, fixup=True)
        kernel, kp = gemm_hopper.plan_kernel(shape[0], shape[1], out, p, shape[2])
        ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
        sass = ck.sass()
        if p.get("K_WAYS") == 2:            # (G29) C^T's 64 x 128 tile: m64n128k16, two consumers
            assert kernel.name == "gemm_splitk_swap" and f"HGMMA.64x{p['BM']}x16.F32.BF16" in sass
        else:
            assert kernel.name == ("gemm_cluster" if p.get("CLUSTER_M", 1) > 1 else "gemm_hopper")
            assert f"HGMMA.64x{p['BN']}x16.F32.BF16" in sass
        if p.get("RELAXED"):
            assert "MEMBAR.ALL.GPU" not in sass
        assert "LDL" not in sass and "STL" not in sass       # no local memory (spills)
        assert ck.resources.get("spill_stores", 0) == 0     # (a kernel built in-process by launch has no ptxas log)
        if p.get("EPILOGUE") == 2:
            assert "UTMASTG" in sass


@pytest.mark.parametrize("shape", [(1024, 1024, 2048), (64, 4096, 4096), (128, 4096, 4096)])
def test_k_ways_sass_with_the_unsigned_role_index(shape):
    """G37: gemm_splitk_swap's role index outside loops as an unsigned remainder (unsigned_role_index): its hand-over
    and C^T store lose the signed divisions (at least a quarter of the kernel's SASS instructions), with no local
    memory; the same kernel without it keeps them."""
    import re

    import tilepy_hip

    for out in (tp.f32, tp.bf16):
        p = gemm_hopper.policy(*shape, out, fixup=True)
        kernel, kp = gemm_hopper.plan_kernel(shape[0], shape[1], out, p, shape[2])
        assert kernel.name == "gemm_splitk_swap" and p.get("K_WAYS") == 2 and kernel.unsigned_role_index
        plain = kernel.retyped()
        plain.unsigned_role_index = False
        n_ins = {}
        for tag, k in (("unsigned", kernel), ("plain", plain)):
            ck = tilepy_hip.compile(k, target="sm_90a", **kp)
            sass = ck.sass()
            assert not re.findall(r"\b(?:LDL|STL)\b", sass), (tag, ck.resources)
            n_ins[tag] = len(re.findall(r"^\s+/\*[0-9a-f]{4,}\*/", sass, re.M))
        assert n_ins["unsigned"] < 0.75 * n_ins["plain"], n_ins


# G22: gemm_cluster's RELAXED=1 forms (the opening cluster barrier relaxed, the closing one replaced by the producer's
# tail), through launch with their constexprs given: 2x1 clusters along M, B multicast, at ragged shapes (M = 900: 15
# row tiles, the grid rounded up to whole clusters, one block wholly past M), one k-tile under 8 stages, B's rows
# padded and C's rows no tensor map can describe (N = 1001: the TMA store's fallback copy)
_CL = dict(BM=64, BN=128, CONSUMERS=1, INSTR=tp.nv.wgmma_m64n128k16_bf16, IN_FLIGHT=0, CLUSTER_M=2, RELAXED=1,
           STAGES=8)
RELAXED_FORMS = {"64x128_s8": _CL, "64x64_s8": dict(_CL, BN=64, INSTR=tp.nv.wgmma_m64n64k16_bf16),
                 "128x128_s6": dict(_CL, BM=128, CONSUMERS=2, STAGES=6),
                 "128x64_s8": dict(_CL, BM=128, BN=64, CONSUMERS=2, INSTR=tp.nv.wgmma_m64n64k16_bf16),
                 "64x128_s8_cl4": dict(_CL, CLUSTER_M=4)}     # G29: clusters of 4 row tiles (B read once per 4)


@pytest.mark.parametrize("out", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("form", list(RELAXED_FORMS))
@pytest.mark.parametrize("m,n,k", [(1024, 1024, 1024), (900, 1000, 520), (130, 264, 64), (300, 1001, 200),
                                   (512, 512, 4096)])
def test_relaxed_cluster_forms(m, n, k, form, out):
    o = tp.bf16 if out == torch.bfloat16 else tp.f32
    p = dict(RELAXED_FORMS[form], EPILOGUE=2 if o == tp.bf16 else 0)
    kernel, kp = gemm_hopper.plan_kernel(m, n, o, p, k)
    assert kernel.name == "gemm_cluster" and kp["RELAXED"] == 1 and kp["CLUSTER_M"] == p["CLUSTER_M"], (kernel.name, kp)
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
    for _ in range(3):                  # the same bits every call (no atomics; the tail leaves no block behind)
        c.fill_(float("nan"))
        gemm_hopper.launch(a, b, c, **p)
    torch.cuda.synchronize()
    assert torch.equal(c, first)


@pytest.mark.parametrize("form", list(RELAXED_FORMS))
def test_relaxed_cluster_sass(form):
    import tilepy_hip

    for o in (tp.f32, tp.bf16):
        p = dict(RELAXED_FORMS[form], EPILOGUE=2 if o == tp.bf16 else 0)
        kernel, kp = gemm_hopper.plan_kernel(1024, 1024, o, p, 1024)
        sass = tilepy_hip.compile(kernel, target="sm_90a", **kp).sass()
        assert f"HGMMA.64x{p['BN']}x16.F32.BF16" in sass and "UTMALDG.2D.MULTICAST" in sass
        assert "LDL" not in sass and "STL" not in sass
        assert "MEMBAR.ALL.GPU" not in sass        # no release at cluster / GPU scope: the point of RELAXED
        assert ("UTMASTG" in sass) == (o == tp.bf16)
