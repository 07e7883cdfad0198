"""G8's policy forms on a real GPU, through `gemm_hopper.launch` as callers get them: swap-AB split-K for <= 32
decode rows (gemm_splitk_swap, FIXUP=3 slots + splitk_sum), swap-AB row tiles for 81-256 rows (G27), 2x1 clusters
(gemm_cluster) for B rows that are not whole 128-byte lines, 128 x 128 tiles for the mid-size shapes the large class
used to split. Every output is poisoned with NaN first and checked against float64 (computed on the GPU); a second
call through the same plan gives the same bits (no atomics in these forms). Skips without a GPU."""

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
        (16, 4096, 4096, "swap"),
        (13, 2045, 1000, "swap"),        # B's rows padded (4090 bytes), 16 k-tiles in 4 splits
        (1, 1024, 4096, "swap"),
        (32, 4096, 4096, "swap"),
        (20, 4096, 1100, "swap"),        # K not a multiple of BK
        (256, 4096, 4096, "swap"),       # (G27: two row tiles of 128, K_WAYS; 2x1 clusters before)
        (240, 4096, 1000, "swap"),       # the second row tile shifted back to end at M
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


I16, I32, I64 = tp.nv.wgmma_m64n16k16_bf16, tp.nv.wgmma_m64n32k16_bf16, tp.nv.wgmma_m64n64k16_bf16
SWC = dict(SWAP_AB=1, IN_FLIGHT=1, FIXUP=3, SPLIT_K=1, CLUSTER_M=2, CONSUMERS=1, BN=64)


@pytest.mark.parametrize("out", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "m,n,k,extra",
    [
        (32, 4096, 4096, dict(BM=16, INSTR=I16, STAGES=16)),                  # cuBLAS's 32-row form: 2 row tiles
        (45, 1000, 1100, dict(BM=16, INSTR=I16, STAGES=16)),                  # 3 row tiles: the grid's 4th is past M
        (64, 4096, 4096, dict(BM=32, INSTR=I32, STAGES=14, IN_FLIGHT=0)),
        (100, 2045, 1000, dict(BM=64, INSTR=I64, STAGES=12)),                 # B's rows padded, a partial row tile
        (40, 4096, 4096, dict(BM=16, INSTR=I16, STAGES=12, BN=128, CONSUMERS=2, SPLIT_K=2)),   # slots per rank
    ],
)
def test_swap_ab_clusters_through_launch(m, n, k, extra, out):
    """gemm_splitk_swap in 2x1 clusters of row tiles (B's tile multicast), unsplit (C stored by the kernel) and split
    (FIXUP=3 slots for every row tile of the rounded-up grid), against float64; the same bits from a second call."""
    g = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = torch.randn(m, k, device=DEV, generator=g).bfloat16()
    b = torch.randn(k, n, device=DEV, generator=g).bfloat16()
    ref = a.double() @ b.double()
    c = torch.full((m, n), float("nan"), device=DEV, dtype=out)
    gemm_hopper.launch(a, b, c, **{**SWC, **extra})
    torch.cuda.synchronize()
    assert torch.isfinite(c).all()
    err = float((c.double() - ref).norm() / ref.norm())
    assert err < (3e-3 if out == torch.bfloat16 else 1e-5), err
    first = c.clone()
    c.fill_(float("nan"))
    gemm_hopper.launch(a, b, c, **{**SWC, **extra})
    torch.cuda.synchronize()
    assert torch.equal(c, first)


@pytest.mark.parametrize("out", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("m,n,k,extra", [(32, 4096, 4096, dict(BM=16, INSTR=I16, STAGES=16)),
                                         (13, 1000, 520, dict(BM=16, INSTR=I16, STAGES=8, CLUSTER_M=1, BN=128,
                                                              CONSUMERS=2, SPLIT_K=3))])
def test_swap_ab_b_given_as_nk(m, n, k, extra, out):
    """B_NK=1: B an (N, K) weight read in place (K-major, the instruction's A without the transpose bit), as the
    lowering launches an nn.Linear's weight: against F.linear's float64 value."""
    from stdlib_kernels import gemm_splitk_swap as gs

    g = torch.Generator(device="cuda").manual_seed(m + n)
    a = torch.randn(m, k, device=DEV, generator=g).bfloat16()
    w = torch.randn(n, k, device=DEV, generator=g).bfloat16()
    ref = a.double() @ w.double().T
    p = {**gemm_hopper.PRESETS["sm_90a"], **SWC, **extra, "B_NK": 1}
    kp = gemm_hopper.kernel_params(p)
    split = kp["SPLIT_K"] > 1
    c = torch.full((m, n), float("nan"), device=DEV, dtype=out)
    ws = torch.zeros(gemm_hopper.workspace_shapes(m, n, p)[0] if split else (1, 1), device=DEV)
    locks = torch.zeros(1, device=DEV, dtype=torch.int32)
    kernel = gs.gemm_splitk_swap_nk_bf16 if out == torch.bfloat16 and not split else gs.gemm_splitk_swap_nk
    kernel[gemm_hopper.grid_of(m, n, p)](a, w, c if not split else torch.empty(m, n, device=DEV), ws, locks,
                                         target="sm_90a", **kp)
    if split:
        (gemm_hopper.splitk_sum_bf16 if out == torch.bfloat16 else gemm_hopper.splitk_sum)[
            (gemm_hopper._cdiv(m, 8), gemm_hopper._cdiv(n, 128))](ws, c, SPLIT_K=kp["SPLIT_K"])
    torch.cuda.synchronize()
    assert torch.isfinite(c).all()
    err = float((c.double() - ref).norm() / ref.norm())
    assert err < (3e-3 if out == torch.bfloat16 else 1e-5), err


def test_swap_ab_cluster_sass():
    import tilepy_hip

    for extra, instr in ((dict(BM=16, INSTR=I16, STAGES=16), "HGMMA.64x16x16"),
                         (dict(BM=32, INSTR=I32, STAGES=14), "HGMMA.64x32x16"),
                         (dict(BM=64, INSTR=I64, STAGES=12), "HGMMA.64x64x16")):
        for out in (tp.f32, tp.bf16):
            p = {**gemm_hopper.PRESETS["sm_90a"], **SWC, **extra}
            kernel, kp = gemm_hopper.plan_kernel(64, 4096, out, p, 4096)
            ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
            sass = ck.sass()
            assert kernel.name == "gemm_splitk_swap" and instr in sass and ".tnspA" in sass, kp
            assert "LDL" not in sass and "STL" not in sass and ck.resources["spill_stores"] == 0


KW = dict(SWAP_AB=1, K_WAYS=2, CONSUMERS=2, BN=64, IN_FLIGHT=1, FIXUP=3, SPLIT_K=1)
I128 = tp.nv.wgmma_m64n128k16_bf16


@pytest.mark.parametrize("out", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "m,n,k,extra",
    [
        (32, 4096, 4096, dict(BM=16, INSTR=I16, STAGES=8, CLUSTER_M=2)),     # cuBLAS's 32-row form
        (45, 1000, 1100, dict(BM=16, INSTR=I16, STAGES=8, CLUSTER_M=2)),     # 3 row tiles, 18 k-tiles
        (64, 4096, 4096, dict(BM=32, INSTR=I32, STAGES=8, CLUSTER_M=2, IN_FLIGHT=0)),
        (100, 2045, 1000, dict(BM=64, INSTR=I64, STAGES=6)),                 # B rows padded, 16 k-tiles, no cluster
        (16, 4096, 4096, dict(BM=16, INSTR=I16, STAGES=8, SPLIT_K=2)),       # slots + splitk_sum
        (30, 1000, 1000, dict(BM=32, INSTR=I32, STAGES=8, SPLIT_K=3)),       # 16 k-tiles in 3 splits of 6 (zeros)
        (256, 4096, 4096, dict(BM=128, INSTR=I128, STAGES=3, CLUSTER_M=2)),
        (1024, 1024, 1000, dict(BM=128, INSTR=I128, STAGES=3)),             # 16 k-tiles, the last one short
        (80, 4096, 4096, dict(BM=64, INSTR=I64, STAGES=6, M_SHIFT=1)),      # last row tile shifted back to end at M
        (100, 2045, 1000, dict(BM=64, INSTR=I64, STAGES=6, M_SHIFT=1, SPLIT_K=2)),   # shifted, into slots
        (45, 1000, 1100, dict(BM=16, INSTR=I16, STAGES=8, M_SHIFT=1, CLUSTER_M=2)),  # a 4th (empty) tile in the cluster
    ],
)
def test_k_ways_through_launch(m, n, k, extra, out):
    """gemm_splitk_swap K_WAYS=2 (two consumer warpgroups over one tile, alternate k-tiles, summed through shared
    memory) through launch: against float64, NaN-poisoned C, the same bits from a second call."""
    g = torch.Generator(device="cuda").manual_seed(m + n + k + 7)
    a = torch.randn(m, k, device=DEV, generator=g).bfloat16()
    b = torch.randn(k, n, device=DEV, generator=g).bfloat16()
    ref = a.double() @ b.double()
    c = torch.full((m, n), float("nan"), device=DEV, dtype=out)
    gemm_hopper.launch(a, b, c, **{**KW, **extra})
    torch.cuda.synchronize()
    assert torch.isfinite(c).all()
    err = float((c.double() - ref).norm() / ref.norm())
    assert err < (3e-3 if out == torch.bfloat16 else 1e-5), err
    first = c.clone()
    c.fill_(float("nan"))
    gemm_hopper.launch(a, b, c, **{**KW, **extra})
    torch.cuda.synchronize()
    assert torch.equal(c, first)


@pytest.mark.parametrize("out", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("m,n,k,extra", [(32, 4096, 4096, dict(BM=16, INSTR=I16, STAGES=8, CLUSTER_M=2)),
                                         (13, 1000, 520, dict(BM=16, INSTR=I16, STAGES=8, SPLIT_K=3))])
def test_k_ways_b_given_as_nk(m, n, k, extra, out):
    """K_WAYS=2 with B an (N, K) weight read in place (B_NK=1), against F.linear's float64 value."""
    from stdlib_kernels import gemm_splitk_swap as gs

    g = torch.Generator(device="cuda").manual_seed(m + n + 1)
    a = torch.randn(m, k, device=DEV, generator=g).bfloat16()
    w = torch.randn(n, k, device=DEV, generator=g).bfloat16()
    ref = a.double() @ w.double().T
    p = {**gemm_hopper.PRESETS["sm_90a"], **KW, **extra, "B_NK": 1}
    kp = gemm_hopper.kernel_params(p)
    split = kp["SPLIT_K"] > 1
    c = torch.full((m, n), float("nan"), device=DEV, dtype=out)
    ws = torch.zeros(gemm_hopper.workspace_shapes(m, n, p)[0] if split else (1, 1), device=DEV)
    locks = torch.zeros(1, device=DEV, dtype=torch.int32)
    kernel = gs.gemm_splitk_swap_nk_bf16 if out == torch.bfloat16 and not split else gs.gemm_splitk_swap_nk
    kernel[gemm_hopper.grid_of(m, n, p)](a, w, c if not split else torch.empty(m, n, device=DEV), ws, locks,
                                         target="sm_90a", **kp)
    if split:
        (gemm_hopper.splitk_sum_bf16 if out == torch.bfloat16 else gemm_hopper.splitk_sum)[
            (gemm_hopper._cdiv(m, 8), gemm_hopper._cdiv(n, 128))](ws, c, SPLIT_K=kp["SPLIT_K"])
    torch.cuda.synchronize()
    assert torch.isfinite(c).all()
    err = float((c.double() - ref).norm() / ref.norm())
    assert err < (3e-3 if out == torch.bfloat16 else 1e-5), err


def test_k_ways_sass():
    import tilepy_hip

    for extra, instr in ((dict(BM=16, INSTR=I16, STAGES=8, CLUSTER_M=2), "HGMMA.64x16x16"),
                         (dict(BM=16, INSTR=I16, STAGES=8, SPLIT_K=2), "HGMMA.64x16x16"),
                         (dict(BM=32, INSTR=I32, STAGES=8, CLUSTER_M=2), "HGMMA.64x32x16"),
                         (dict(BM=64, INSTR=I64, STAGES=6, CLUSTER_M=2), "HGMMA.64x64x16"),
                         (dict(BM=128, INSTR=I128, STAGES=3), "HGMMA.64x128x16")):
        for out in (tp.f32, tp.bf16):
            p = {**gemm_hopper.PRESETS["sm_90a"], **KW, **extra}
            kernel, kp = gemm_hopper.plan_kernel(64, 4096, out, p, 4096)
            ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
            sass = ck.sass()
            assert kernel.name == "gemm_splitk_swap" and instr in sass and ".tnspA" in sass, kp
            assert "LDL" not in sass and "STL" not in sass and ck.resources["spill_stores"] == 0, kp


@pytest.mark.parametrize("out", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("m,n,k", [(128, 4096, 4096), (100, 4096, 1000), (80, 2200, 520), (65, 2200, 1001),
                                   (120, 4095, 700), (32, 4096, 4096), (32, 2048, 1100)])
def test_k_ways_policy_through_launch(m, n, k, out):
    """`launch`'s policy at 65-128 rows (64 x 64 tiles of C^T filling half a wave to one) and 32 rows (split) is
    swap-AB K_WAYS=2: against
    float64, NaN-poisoned C, the same bits twice; K = 1001 / N = 4095 (rows padded by the plan). An A that TMA cannot
    load (its base 2 bytes off 16) is still computed correctly (the policy without the form, or A copied first)."""
    o = tp.bf16 if out == torch.bfloat16 else tp.f32
    assert gemm_hopper.policy(m, n, k, o, fixup=True).get("K_WAYS") == 2
    g = torch.Generator(device="cuda").manual_seed(m + n + k + 3)
    a = torch.randn(m, k, device=DEV, generator=g).bfloat16()
    b = torch.randn(k, n, device=DEV, generator=g).bfloat16()
    ref = a.double() @ b.double()
    c = torch.full((m, n), float("nan"), device=DEV, dtype=out)
    gemm_hopper.launch(a, b, c)
    torch.cuda.synchronize()
    err = float((c.double() - ref).norm() / ref.norm())
    assert torch.isfinite(c).all() and err < (3e-3 if out == torch.bfloat16 else 1e-5), err
    first = c.clone()
    c.fill_(float("nan"))
    gemm_hopper.launch(a, b, c)
    torch.cuda.synchronize()
    assert torch.equal(c, first)
    flat = torch.empty(m * k + 1, device=DEV, dtype=torch.bfloat16)
    a_off = flat[1:].view(m, k)          # contiguous, base 2 bytes past a 16-byte boundary
    a_off.copy_(a)
    assert not gemm_hopper._tma_storable(a_off)
    c.fill_(float("nan"))
    gemm_hopper.launch(a_off, b, c)
    torch.cuda.synchronize()
    err = float((c.double() - ref).norm() / ref.norm())
    assert torch.isfinite(c).all() and err < (3e-3 if out == torch.bfloat16 else 1e-5), err
    # (which way launch takes it: the policy without the form, or, past 1024^3, A copied into an aligned buffer)
    plan = gemm_hopper._PLANS.get((m, n, k, c.dtype, None, "sm_90a", "A / B not TMA-loadable"))
    assert plan is None or plan.params.get("K_WAYS", 1) == 1


CK = dict(KW, CLUSTER_K=2)
I48, I80, I104 = tp.nv.wgmma_m64n48k16_bf16, tp.nv.wgmma_m64n80k16_bf16, tp.nv.wgmma_m64n104k16_bf16


@pytest.mark.parametrize("out", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "m,n,k,extra",
    [
        (32, 4096, 4096, dict(BM=32, INSTR=I32, STAGES=8)),
        (20, 4096, 3100, dict(BM=24, INSTR=tp.nv.wgmma_m64n24k16_bf16, STAGES=8)),   # n24, 4 rows past M
        (13, 1000, 1100, dict(BM=16, INSTR=I16, STAGES=8)),     # 18 k-tiles: 10 per rank (even), zeros past K
        (45, 2045, 1000, dict(BM=48, INSTR=I48, STAGES=6)),     # B's rows padded, n48
        (80, 4096, 4096, dict(BM=80, INSTR=I80, STAGES=5)),     # one 80-row tile: no rows past M in A's box
        (100, 4096, 520, dict(BM=104, INSTR=I104, STAGES=4)),   # 9 k-tiles: rank 1 gets 3 real + zeros
        (128, 2200, 4096, dict(BM=128, INSTR=I128, STAGES=4)),
        (130, 1000, 700, dict(BM=64, INSTR=I64, STAGES=6, M_SHIFT=1)),   # 3 row tiles, the last shifted
        (5, 4096, 1000, dict(BM=8, INSTR=tp.nv.wgmma_m64n8k16_bf16, STAGES=8)),   # n8: 3 of 8 rows past M
    ],
)
@pytest.mark.parametrize("push", [0, 1])
def test_cluster_k_through_launch(m, n, k, extra, out, push):
    """CLUSTER_K=2: K split over the two blocks of a cluster, rank 1's sum read by rank 0 through distributed shared
    memory (tp.load(..., cta=1)), no slots, no second kernel: against float64, NaN-poisoned C, the same bits from a
    second call (the sum's order is fixed). PUSH=1 (G19): each rank's sum pushed into the other's shared memory by
    st.async (tp.store_remote) completing its mbarrier, each rank storing half the tile's columns (BM 128 does not
    fit beside 4 stages: 3 there)."""
    if push:
        extra = {**extra, "PUSH": 1, **({"STAGES": 3} if extra["BM"] == 128 else {})}
    g = torch.Generator(device="cuda").manual_seed(m + n + k + 11)
    a = torch.randn(m, k, device=DEV, generator=g).bfloat16()
    b = torch.randn(k, n, device=DEV, generator=g).bfloat16()
    ref = a.double() @ b.double()
    c = torch.full((m, n), float("nan"), device=DEV, dtype=out)
    gemm_hopper.launch(a, b, c, **{**CK, **extra})
    torch.cuda.synchronize()
    assert torch.isfinite(c).all()
    err = float((c.double() - ref).norm() / ref.norm())
    assert err < (3e-3 if out == torch.bfloat16 else 1e-5), err
    plan = next(p for key, p in gemm_hopper._PLANS.items() if key[:3] == (m, n, k) and ("CLUSTER_K", 2) in key)
    assert plan.summer is None and plan.params["CLUSTER_K"] == 2
    first = c.clone()
    c.fill_(float("nan"))
    gemm_hopper.launch(a, b, c, **{**CK, **extra})
    torch.cuda.synchronize()
    assert torch.equal(c, first)


def test_cluster_k_b_given_as_nk():
    """CLUSTER_K=2 with B an (N, K) weight read in place (B_NK=1), against F.linear's float64 value."""
    from stdlib_kernels import gemm_splitk_swap as gs

    m, n, k = 32, 2048, 1000
    g = torch.Generator(device="cuda").manual_seed(5)
    a = torch.randn(m, k, device=DEV, generator=g).bfloat16()
    w = torch.randn(n, k, device=DEV, generator=g).bfloat16()
    ref = a.double() @ w.double().T
    p = {**gemm_hopper.PRESETS["sm_90a"], **CK, "BM": 32, "INSTR": I32, "STAGES": 8, "B_NK": 1}
    kp = gemm_hopper.kernel_params(p)
    c = torch.full((m, n), float("nan"), device=DEV, dtype=torch.bfloat16)
    ws = torch.zeros((1, 1), device=DEV)
    locks = torch.zeros(1, device=DEV, dtype=torch.int32)
    gs.gemm_splitk_swap_nk_bf16[gemm_hopper.grid_of(m, n, p)](a, w, c, ws, locks, target="sm_90a", **kp)
    torch.cuda.synchronize()
    assert torch.isfinite(c).all()
    err = float((c.double() - ref).norm() / ref.norm())
    assert err < 3e-3, err


def test_cluster_k_sass():
    """HGMMA at the new widths, the remote loads generic (LD, not LDS), a cluster barrier, no local memory."""
    import tilepy_hip

    for extra, instr in ((dict(BM=32, INSTR=I32, STAGES=8), "HGMMA.64x32x16"),
                         (dict(BM=80, INSTR=I80, STAGES=5), "HGMMA.64x80x16"),
                         (dict(BM=128, INSTR=I128, STAGES=4), "HGMMA.64x128x16"),
                         (dict(BM=32, INSTR=I32, STAGES=8, PUSH=1), "HGMMA.64x32x16"),
                         (dict(BM=104, INSTR=I104, STAGES=4, PUSH=1), "HGMMA.64x104x16")):
        for out in (tp.f32, tp.bf16):
            p = {**gemm_hopper.PRESETS["sm_90a"], **CK, **extra}
            kernel, kp = gemm_hopper.plan_kernel(64, 4096, out, p, 4096)
            ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
            sass = ck.sass()
            assert kernel.name == "gemm_splitk_swap" and instr in sass and ".tnspA" in sass, kp
            assert "UCGABAR_WAIT" in sass, kp
            if extra.get("PUSH"):   # the exchange: 16-byte st.async, no GPU-scope fence anywhere
                assert "STAS.128" in sass and "MEMBAR.ALL.GPU" not in sass, kp
            else:
                assert "LD.E" in sass, kp
            assert "LDL" not in sass and "STL" not in sass and ck.resources["spill_stores"] == 0, kp


@pytest.mark.parametrize("out", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("m,n,k", [(32, 4096, 4096), (28, 2200, 3100), (40, 4096, 1000), (64, 4096, 4096),
                                   (56, 2200, 3100), (80, 4096, 4096), (72, 4095, 2050)])
def test_cluster_split_four_stages_through_launch(m, n, k, out):
    """G23: the policy's cluster split at 25-80 rows runs 4 stages per ring (CLUSTER_SPLIT_STAGES), each ring turning
    over 2-8 times, odd k-tile counts (3100 / 2050: 49 / 33), N = 4095 (B's rows padded): against float64,
    NaN-poisoned C, the same bits twice."""
    o = tp.bf16 if out == torch.bfloat16 else tp.f32
    p = gemm_hopper.policy(m, n, k, o, fixup=True)
    assert p.get("CLUSTER_K") == 2 and p.get("PUSH") == 1 and p["STAGES"] == 4, p
    g = torch.Generator(device="cuda").manual_seed(m + n + k + 23)
    a = torch.randn(m, k, device=DEV, generator=g).bfloat16()
    b = torch.randn(k, n, device=DEV, generator=g).bfloat16()
    ref = a.double() @ b.double()
    c = torch.full((m, n), float("nan"), device=DEV, dtype=out)
    gemm_hopper.launch(a, b, c)
    torch.cuda.synchronize()
    err = float((c.double() - ref).norm() / ref.norm())
    assert torch.isfinite(c).all() and err < (3e-3 if out == torch.bfloat16 else 1e-5), err
    first = c.clone()
    c.fill_(float("nan"))
    gemm_hopper.launch(a, b, c)
    torch.cuda.synchronize()
    assert torch.equal(c, first)


def test_cluster_split_four_stages_sass():
    """The policy's 4-stage forms (BM 32 / 48 / 64 / 80): HGMMA at BM, the 16-byte st.async exchange, no local
    memory."""
    import tilepy_hip

    for m in (32, 48, 64, 80):
        for out in (tp.f32, tp.bf16):
            p = gemm_hopper.policy(m, 4096, 4096, out, fixup=True)
            kernel, kp = gemm_hopper.plan_kernel(m, 4096, out, p, 4096)
            ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
            sass = ck.sass()
            assert kp["STAGES"] == 4 and f"HGMMA.64x{kp['BM']}x16" in sass and "STAS.128" in sass, kp
            assert "LDL" not in sass and "STL" not in sass and ck.resources["spill_stores"] == 0, kp


@pytest.mark.parametrize("out", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("m,n,k,extra", [
    (112, 4096, 4096, None), (128, 4096, 4096, None), (105, 2200, 3100, None),     # the policy (49 k-tiles: odd)
    (120, 4095, 4100, None),                                                       # B's rows padded, n128
    (130, 1000, 700, dict(BM=64, INSTR=I64, STAGES=4, M_SHIFT=1)),                 # 3 row tiles, the last shifted
    (32, 2048, 1100, dict(BM=32, INSTR=I32, STAGES=4)),                            # 18 k-tiles
])
def test_cluster_split_one_exchange_tile_through_launch(m, n, k, extra, out):
    """XCH=1 (G23): the pushed exchange with one tile for consumer 1's hand-over and the other rank's sum (the cluster
    split's form at 105-128 rows, 4 stages per ring): against float64, NaN-poisoned C, the same bits twice."""
    o = tp.bf16 if out == torch.bfloat16 else tp.f32
    # (extra None: the cluster split's own 105-128-row form, the policy there until G27)
    given = gemm_hopper.cluster_split(m, n, k) if extra is None else {**CK, **extra, "PUSH": 1, "XCH": 1}
    p = {**gemm_hopper.policy(m, n, k, o, fixup=True, forms=False), **given}
    assert p.get("CLUSTER_K") == 2 and p.get("PUSH") == 1 and p.get("XCH") == 1 and p["STAGES"] == 4, p
    g = torch.Generator(device="cuda").manual_seed(m + n + k + 29)
    a = torch.randn(m, k, device=DEV, generator=g).bfloat16()
    b = torch.randn(k, n, device=DEV, generator=g).bfloat16()
    ref = a.double() @ b.double()
    c = torch.full((m, n), float("nan"), device=DEV, dtype=out)
    gemm_hopper.launch(a, b, c, **given)
    torch.cuda.synchronize()
    err = float((c.double() - ref).norm() / ref.norm())
    assert torch.isfinite(c).all() and err < (3e-3 if out == torch.bfloat16 else 1e-5), err
    first = c.clone()
    c.fill_(float("nan"))
    gemm_hopper.launch(a, b, c, **given)
    torch.cuda.synchronize()
    assert torch.equal(c, first)


def test_cluster_split_one_exchange_tile_sass():
    """XCH=1 at BM 112 / 128: HGMMA at BM, 16-byte st.async, no GPU-scope fence, no local memory."""
    import tilepy_hip

    for m in (112, 128):
        for out in (tp.f32, tp.bf16):
            # (as `launch` lays a caller's constexprs: over the policy without its forms)
            p = {**gemm_hopper.policy(m, 4096, 4096, out, fixup=True, forms=False),
                 **gemm_hopper.cluster_split(m, 4096, 4096)}
            kernel, kp = gemm_hopper.plan_kernel(m, 4096, out, p, 4096)
            ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
            sass = ck.sass()
            assert kp["XCH"] == 1 and kp["STAGES"] == 4 and f"HGMMA.64x{m}x16" in sass and "STAS.128" in sass, kp
            assert "MEMBAR.ALL.GPU" not in sass, kp
            assert "LDL" not in sass and "STL" not in sass and ck.resources["spill_stores"] == 0, kp


@pytest.mark.parametrize("out", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("m,n,k", [(136, 2200, 3100), (192, 4096, 4096), (200, 4095, 1001), (224, 4096, 520),
                                   (250, 2200, 700), (256, 4096, 4096), (112, 4096, 4096), (128, 4096, 14336),
                                   (96, 4096, 4096), (88, 2200, 3100)])
def test_two_unsplit_row_tiles_policy_through_launch(m, n, k, out):
    """G27: `launch`'s policy at 81-256 rows (two unsplit swap-AB row tiles, K_WAYS=2: BM 48 at 81-96 rows, 64 shifted
    at 97-128, BM 80 / 96 / 112 unshifted with rows past M, BM 128 shifted at 225-256): against float64, NaN-poisoned
    C, the same bits twice; N = 4095 / K = 1001 (rows padded by the plan), odd k-tile counts (3100: 49)."""
    o = tp.bf16 if out == torch.bfloat16 else tp.f32
    p = gemm_hopper.policy(m, n, k, o, fixup=True)
    assert p.get("K_WAYS") == 2 and p.get("SPLIT_K", 1) == 1 and p.get("CLUSTER_K", 1) == 1, p
    assert gemm_hopper.grid_of(m, n, p)[0] == 2
    g = torch.Generator(device="cuda").manual_seed(m + n + k + 27)
    a = torch.randn(m, k, device=DEV, generator=g).bfloat16()
    b = torch.randn(k, n, device=DEV, generator=g).bfloat16()
    ref = a.double() @ b.double()
    c = torch.full((m, n), float("nan"), device=DEV, dtype=out)
    gemm_hopper.launch(a, b, c)
    torch.cuda.synchronize()
    err = float((c.double() - ref).norm() / ref.norm())
    assert torch.isfinite(c).all() and err < (3e-3 if out == torch.bfloat16 else 1e-5), err
    first = c.clone()
    c.fill_(float("nan"))
    gemm_hopper.launch(a, b, c)
    torch.cuda.synchronize()
    assert torch.equal(c, first)


def test_two_unsplit_row_tiles_sass():
    """G27's row tiles (BM 48 / 64 / 80 / 96 / 112 / 128, both outputs): HGMMA at BM with the transposed A operand,
    no local memory, no spills."""
    import tilepy_hip

    for m in (96, 128, 160, 192, 224, 256):
        for out in (tp.f32, tp.bf16):
            p = gemm_hopper.policy(m, 4096, 4096, out, fixup=True)
            kernel, kp = gemm_hopper.plan_kernel(m, 4096, out, p, 4096)
            ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
            sass = ck.sass()
            assert kp["K_WAYS"] == 2 and f"HGMMA.64x{kp['BM']}x16" in sass and ".tnspA" in sass, kp
            assert "LDL" not in sass and "STL" not in sass and ck.resources["spill_stores"] == 0, kp
