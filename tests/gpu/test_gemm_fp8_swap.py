"""gemm_fp8's swap-AB split-K form for skinny rows (`gemm_fp8_swap`, SWAP=1: C^T = B @ A^T, A's rows the wgmma
instruction's N) on a real GPU: against float64 of the e4m3 inputs and next to torch._scaled_mm on the same inputs,
over every BM of the table (16, 32, 64, 128 rows; 24, 48, 96), two consumers on one tile (K_WAYS=2), the rows over a
cluster (CLUSTER_M=2), unsplit and split (slots summed by splitk_sum_bf16, or summed in the kernel over a cluster:
CLUSTER_K), ragged M, N and K (K a multiple of 16, not of the 128-wide k-tile), the decode shapes at full size, and
the scaled tile's bf16 rounding; the skinny class's policy is this form. Outputs are poisoned with NaN first. Skips
without a GPU."""

from __future__ import annotations

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

import tilepy as tp  # noqa: E402
from stdlib_kernels import gemm_fp8  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")


def _quantize(x):
    scale = (x.abs().max().float() / 448.0).clamp(min=1e-12)
    return (x / scale).to(torch.float8_e4m3fn), scale.reshape(1)


CASES = [
    ((16, 4096, 4096), dict(CLUSTER_K=1)),   # decode: BM 16, split 4 into slots
    ((128, 4096, 4096), {}),                 # BM 128, split 4 (slots: no room for the cluster's receive tiles)
    ((32, 14336, 4096), {}),                 # 112 column tiles: unsplit, C stored from the registers
    ((256, 4096, 14336), {}),                # two 128-row tiles, split 2
    ((40, 1000, 2064), {}),                  # ragged: BM 64 over 40 rows, N off the 128-column tile, K off BK
    ((100, 520, 1040), dict(SPLIT_K=3)),     # ragged, an uneven split (the last share reads zeros past K)
    ((7, 264, 528), dict(SPLIT_K=1, STAGES=2)),   # a ring of 2 stages turning over, 7 rows
    ((24, 300, 2064), dict(BN=64, CONSUMERS=1, BM=32, INSTR=gemm_fp8.SWAP_INSTR[32])),   # one consumer
    # CLUSTER_K (G21): the split summed in the kernel over a (1, 1, 2 / 4) cluster by st.async butterfly rounds
    ((16, 4096, 4096), dict(CLUSTER_K=4)),                   # the table's 16-row form: 4 ranks, 11 stages
    ((64, 4096, 4096), dict(CLUSTER_K=4)),                   # BM 64, 4 ranks beside 2 receive tiles
    ((128, 4096, 4096), dict(BN=64, CONSUMERS=1, CLUSTER_K=2)),   # 128 rows over 64-column tiles, 2 ranks
    ((256, 4096, 14336), dict(CLUSTER_K=2)),                 # two row tiles, 2 ranks
    ((40, 1000, 2064), dict(CLUSTER_K=4)),                   # ragged M, N, K (the last share past K)
    ((100, 520, 1040), dict(CLUSTER_K=2, STAGES=2)),         # ragged, a ring of 2 stages turning over
    ((24, 136, 2064), dict(BN=64, CONSUMERS=1, BM=32, INSTR=gemm_fp8.SWAP_INSTR[32], CLUSTER_K=4)),  # 16 cols a rank
    # K_WAYS=2 (G24): two consumers on one 64-column tile taking alternate k-tiles, consumer 1's sum handed over
    ((16, 4096, 4096), dict(K_WAYS=2)),                      # the cluster's sum (2 ranks), 12 stages
    ((128, 4096, 4096), dict(K_WAYS=2)),                     # BM 128, 2 ranks, 6 stages
    ((256, 4096, 14336), dict(K_WAYS=2)),                    # two row tiles, unsplit (128 tiles)
    ((40, 1000, 2064), dict(K_WAYS=2, CLUSTER_K=1)),         # ragged, the slots
    ((100, 520, 1168), dict(K_WAYS=2, SPLIT_K=1, STAGES=4)),  # an odd k-tile count, a ring of 4 turning over
    # BM the rows' own instruction N (no rows past M in A's box): e4m3 n24 / n48 / n96
    ((24, 4096, 4096), dict(BM=24, BN=64)),
    ((48, 1000, 2064), dict(BM=48, K_WAYS=2)),
    ((96, 4096, 4096), dict(BM=96, BN=64)),
    ((192, 4096, 4096), dict(BM=96, K_WAYS=2)),              # two whole 96-row tiles
    # CLUSTER_M=2 (G24): the rows split over a (2, 1, 1) cluster, B's tiles multicast into both blocks, no K split
    ((16, 4096, 4096), dict(CLUSTER_M=2, BN=64)),            # BM 8 (n8) per block, one consumer
    ((16, 4096, 4096), dict(CLUSTER_M=2, K_WAYS=2)),         # two consumers on alternate k-tiles
    ((128, 4096, 4096), dict(CLUSTER_M=2, BN=64)),           # BM 64 per block
    ((64, 4096, 14336), dict(CLUSTER_M=2, K_WAYS=2)),        # long K (112 k-tiles through a ring of 12)
    ((7, 264, 1040), dict(CLUSTER_M=2, BN=64, STAGES=2)),    # the second row tile wholly past M, a ring of 2
    ((100, 520, 1040), dict(CLUSTER_M=2, K_WAYS=2, STAGES=4)),   # ragged M, N, K (an odd k-tile count)
    ((40, 1000, 2064), dict(CLUSTER_M=2, BN=128)),           # two consumers of 64 columns each, ragged
    # G30: whole 128-row tiles over 64-column tiles, one consumer, no K split (256 rows' policy form)
    ((256, 4096, 4096), dict(BM=128, BN=64, CONSUMERS=1, SPLIT_K=1)),    # 128 blocks, 9 stages
    ((200, 520, 1040), dict(BM=128, BN=64, CONSUMERS=1, SPLIT_K=1, STAGES=3)),   # ragged second row tile, ring of 3
    # G30: the copies TMA only (TMA_ONLY=1): the cluster's split at 16 / 128 rows, ragged (the copy engine's zeros past
    # M, N, K), slots, K_WAYS=2 unsplit, the rows over a cluster with B multicast, whole 128-row tiles
    ((16, 4096, 4096), dict(TMA_ONLY=1)),
    ((128, 4096, 4096), dict(BN=64, CONSUMERS=1, CLUSTER_K=2, TMA_ONLY=1)),
    ((40, 1000, 2064), dict(CLUSTER_K=2, TMA_ONLY=1)),
    ((100, 520, 1040), dict(SPLIT_K=3, TMA_ONLY=1)),
    ((100, 520, 1168), dict(K_WAYS=2, SPLIT_K=1, STAGES=4, TMA_ONLY=1)),
    ((16, 4096, 4096), dict(CLUSTER_M=2, K_WAYS=2, TMA_ONLY=1)),
    ((256, 4096, 4096), dict(BM=128, BN=64, CONSUMERS=1, SPLIT_K=1, TMA_ONLY=1)),
]


@pytest.mark.parametrize("shape,extra", CASES, ids=[f"{m}x{n}x{k}-{sorted(e)}" for (m, n, k), e in CASES])
def test_swap_against_float64_and_scaled_mm(shape, extra):
    M, N, K = shape
    g = torch.Generator(device="cuda").manual_seed(M + N + K)
    a, sa = _quantize(torch.randn(M, K, device=DEV, generator=g))
    b, sb = _quantize(torch.randn(N, K, device=DEV, generator=g))
    out = torch.full((M, N), float("nan"), device=DEV, dtype=torch.bfloat16)
    p = gemm_fp8.params_for(M, N, K, SWAP=1, **extra)
    gemm_fp8.launch(a, b, sa, sb, out, SWAP=1, **extra)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double().t()) * sa.double() * sb.double()
    assert not out.isnan().any()
    # test_gemm_fp8.py's contract on the GPU: one bf16 rounding over the tensor cores' fp8 sum (which keeps fewer bits
    # than f32 and is not promoted), like for like with _scaled_mm's fast accumulation where it takes the shape
    err = float((out.double() - ref).norm() / ref.norm())
    assert err <= 2.0**-8, (err, p["SPLIT_K"])
    if M % 16 == 0 and N % 16 == 0 and K % 16 == 0:    # torch._scaled_mm takes multiples of 16 only
        fast = torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16, use_fast_accum=True).double()
        promoted = torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16).double()
        err_fast = float((fast - ref).norm() / ref.norm())
        err_promoted = float((promoted - ref).norm() / ref.norm())
        assert err <= 1.5 * err_fast + 1e-5 and err <= 2.0 * err_promoted + 1e-5, (err, err_fast, err_promoted)
    # elementwise: half a bf16 ulp plus a share of the sum of |products| (an unwritten, misplaced or misscaled
    # element, e.g. a slot summed twice, is far outside)
    mag = (a.double().abs() @ b.double().abs().t()) * sa.double() * sb.double()
    excess = (out.double() - ref).abs() - (2.0**-8 * ref.abs() + 2.0**-9 * mag)
    assert bool((excess <= 0).all()), (float(excess.max()), p["SPLIT_K"])


def test_cluster_split_gives_the_same_bits_twice():
    """CLUSTER_K's sum is a fixed order (butterfly rounds): two launches on the same inputs give the same bits."""
    M, N, K = 32, 4096, 4096
    g = torch.Generator(device="cuda").manual_seed(9)
    a, sa = _quantize(torch.randn(M, K, device=DEV, generator=g))
    b, sb = _quantize(torch.randn(N, K, device=DEV, generator=g))
    outs = []
    for _ in range(2):
        out = torch.full((M, N), float("nan"), device=DEV, dtype=torch.bfloat16)
        gemm_fp8.launch(a, b, sa, sb, out, SWAP=1, CLUSTER_K=4)
        outs.append(out)
    torch.cuda.synchronize()
    assert torch.equal(outs[0], outs[1])


@pytest.mark.parametrize("M", [24, 40, 96, 192])
def test_exact_bm_policy_through_launch(M):
    """G24's rows of the table (BM the rows' own instruction N, K_WAYS=2, the cluster's split of 2 or unsplit; the
    policy before G34's row tiles: swap_policy(g34=False)) through launch, at full size: against float64, like for
    like with _scaled_mm's fast accumulation."""
    N = K = 4096
    p = gemm_fp8.swap_policy(M, N, K, g34=False)
    assert p["K_WAYS"] == 2 and p["BM"] < 128 and p["BM"] >= M / 2
    g = torch.Generator(device="cuda").manual_seed(M)
    a, sa = _quantize(torch.randn(M, K, device=DEV, generator=g))
    b, sb = _quantize(torch.randn(N, K, device=DEV, generator=g))
    out = torch.full((M, N), float("nan"), device=DEV, dtype=torch.bfloat16)
    gemm_fp8.launch(a, b, sa, sb, out, **p)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double().t()) * sa.double() * sb.double()
    assert not out.isnan().any()
    err = float((out.double() - ref).norm() / ref.norm())
    fast = torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16, use_fast_accum=True).double()
    assert err <= 2.0**-8 and err <= 1.5 * float((fast - ref).norm() / ref.norm()) + 1e-5, err
    mag = (a.double().abs() @ b.double().abs().t()) * sa.double() * sb.double()
    assert bool(((out.double() - ref).abs() <= 2.0**-8 * ref.abs() + 2.0**-9 * mag).all())


def test_skinny_policy_is_swap_through_launch():
    M, N, K = 128, 4096, 4096
    assert gemm_fp8.kernel_of(gemm_fp8.params_for(M, N, K))[0] is gemm_fp8.gemm_fp8_swap


def test_swap_split_reuses_its_workspace_and_follows_new_inputs():
    """The split's slots live in one buffer per (device, shape), reused: a second call on other inputs gives their
    product (every slot rewritten), not a mix."""
    M, N, K = 64, 1024, 4096
    g = torch.Generator(device="cuda").manual_seed(5)
    outs, refs = [], []
    for _ in range(2):
        a, sa = _quantize(torch.randn(M, K, device=DEV, generator=g))
        b, sb = _quantize(torch.randn(N, K, device=DEV, generator=g))
        out = torch.full((M, N), float("nan"), device=DEV, dtype=torch.bfloat16)
        gemm_fp8.launch(a, b, sa, sb, out, SWAP=1, CLUSTER_K=1)     # (the slots, not the cluster's sum)
        outs.append(out)
        refs.append((a.double() @ b.double().t()) * sa.double() * sb.double())
    assert gemm_fp8.params_for(M, N, K, SWAP=1, CLUSTER_K=1)["SPLIT_K"] > 1
    for out, ref in zip(outs, refs):
        assert float((out.double() - ref).norm() / ref.norm()) < 4e-3


@pytest.mark.parametrize("M", [1, 16, 32, 128, 256])
def test_g30_policy_through_launch(M):
    """G30's policy through launch with no constexprs: the copies TMA only at every row, 16 rows or fewer unsplit over
    64-column tiles (64 blocks), 256 rows as two whole 128-row tiles unsplit; against float64, like for like with
    _scaled_mm's fast accumulation (16-row multiples)."""
    N = K = 4096
    p = gemm_fp8.policy(M, N, K)
    assert p["TMA_ONLY"] == 1
    if M <= 16 or M == 256:
        assert (p["BN"], p["SPLIT_K"], p["CLUSTER_K"], p["CONSUMERS"]) == (64, 1, 1, 1), p
    g = torch.Generator(device="cuda").manual_seed(30 + M)
    a, sa = _quantize(torch.randn(M, K, device=DEV, generator=g))
    b, sb = _quantize(torch.randn(N, K, device=DEV, generator=g))
    out = torch.full((M, N), float("nan"), device=DEV, dtype=torch.bfloat16)
    gemm_fp8.launch(a, b, sa, sb, out)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double().t()) * sa.double() * sb.double()
    assert not out.isnan().any()
    err = float((out.double() - ref).norm() / ref.norm())
    assert err <= 2.0**-8, err
    if M % 16 == 0:
        fast = torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16, use_fast_accum=True).double()
        assert err <= 1.5 * float((fast - ref).norm() / ref.norm()) + 1e-5, err
    mag = (a.double().abs() @ b.double().abs().t()) * sa.double() * sb.double()
    assert bool(((out.double() - ref).abs() <= 2.0**-8 * ref.abs() + 2.0**-9 * mag).all())


@pytest.mark.parametrize("M", [16, 256])
def test_g30_policy_on_unaligned_bases(M):
    """The policy's TMA_ONLY needs tensor maps (16-byte aligned bases): launch drops it for operands that start off
    16 bytes, and the per-element copies compute the same product as the aligned operands through the TMA."""
    N, K = 520, 1040
    g = torch.Generator(device="cuda").manual_seed(M)
    a, sa = _quantize(torch.randn(M, K, device=DEV, generator=g))
    b, sb = _quantize(torch.randn(N, K, device=DEV, generator=g))
    a_off = torch.empty(M * K + 1, device=DEV, dtype=a.dtype)[1:].view(M, K)
    b_off = torch.empty(N * K + 3, device=DEV, dtype=b.dtype)[3:].view(N, K)
    a_off.copy_(a)
    b_off.copy_(b)
    assert a_off.data_ptr() % 16 and b_off.data_ptr() % 16 and a_off.is_contiguous()
    outs = []
    for x, y in ((a, b), (a_off, b_off)):
        out = torch.full((M, N), float("nan"), device=DEV, dtype=torch.bfloat16)
        gemm_fp8.launch(x, y, sa, sb, out)
        outs.append(out)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double().t()) * sa.double() * sb.double()
    for out in outs:
        assert not out.isnan().any()
        assert float((out.double() - ref).norm() / ref.norm()) <= 2.0**-8
    mag = (a.double().abs() @ b.double().abs().t()) * sa.double() * sb.double()
    assert bool(((outs[1].double() - outs[0].double()).abs() <= 2.0**-8 * ref.abs() + 2.0**-8 * mag).all())


G34 = [((128, 4096, 4096), dict(BN=64, CLUSTER_K=2, HALF_SUM=1, TMA_ONLY=1)),
       ((128, 4096, 4096), dict(BN=64, CLUSTER_K=2, HALF_SUM=1, STORE_T=1, TMA_ONLY=1)),
       ((96, 4096, 4096), dict(BM=96, K_WAYS=2, CLUSTER_K=2, HALF_SUM=1, STORE_T=1, TMA_ONLY=1)),
       ((32, 4096, 14336), dict(BN=64, CLUSTER_K=2, HALF_SUM=1, TMA_ONLY=1)),
       ((40, 1000, 1040), dict(BN=64, CLUSTER_K=2, HALF_SUM=1, STORE_T=1, STAGES=2)),
       ((130, 264, 784), dict(BN=64, CLUSTER_K=2, HALF_SUM=1, STAGES=3)),
       ((16, 4096, 4096), dict(BN=64, SPLIT_K=1, STORE_T=1, TMA_ONLY=1)),
       ((192, 4096, 4096), dict(BM=96, K_WAYS=2, SPLIT_K=1, STORE_T=1, TMA_ONLY=1)),
       ((200, 520, 1040), dict(BM=128, BN=64, CONSUMERS=1, SPLIT_K=1, STORE_T=1, STAGES=3)),
       # STORE_T on the policy's two unsplit row tiles (one consumer): BM 104 / 80 / 24, the second tile ragged
       ((200, 4096, 4096), dict(BM=104, BN=64, CONSUMERS=1, SPLIT_K=1, STORE_T=1, TMA_ONLY=1)),
       ((136, 1000, 2064), dict(BM=80, BN=64, CONSUMERS=1, SPLIT_K=1, STORE_T=1, TMA_ONLY=1)),
       ((40, 4096, 4096), dict(BM=24, BN=64, CONSUMERS=1, SPLIT_K=1, STORE_T=1, TMA_ONLY=1))]


G34_IDS = [f"{m}x{n}x{k}-" + "-".join(e for e in x if e in ("HALF_SUM", "STORE_T")) for (m, n, k), x in G34]


def _forced_form_against_float64(shape, form, seed):
    """A form forced through launch (its constexprs `form`, SWAP=1 for the swap forms): against float64 of the e4m3
    inputs, NaN-poisoned output; like for like with _scaled_mm's fast accumulation where it takes the shape
    (16-multiples); elementwise within half a bf16 ulp plus a share of the sum of |products|."""
    M, N, K = shape
    g = torch.Generator(device="cuda").manual_seed(seed + M + N)
    a, sa = _quantize(torch.randn(M, K, device=DEV, generator=g))
    b, sb = _quantize(torch.randn(N, K, device=DEV, generator=g))
    out = torch.full((M, N), float("nan"), device=DEV, dtype=torch.bfloat16)
    p = gemm_fp8.params_for(M, N, K, **form)
    assert all(p[k] == v for k, v in form.items()), p
    gemm_fp8.launch(a, b, sa, sb, out, **form)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double().t()) * sa.double() * sb.double()
    assert not out.isnan().any()
    err = float((out.double() - ref).norm() / ref.norm())
    assert err <= 2.0**-8, err
    if M % 16 == 0 and N % 16 == 0:
        fast = torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16, use_fast_accum=True).double()
        assert err <= 1.5 * float((fast - ref).norm() / ref.norm()) + 1e-5, err
    mag = (a.double().abs() @ b.double().abs().t()) * sa.double() * sb.double()
    assert bool(((out.double() - ref).abs() <= 2.0**-8 * ref.abs() + 2.0**-9 * mag).all())


@pytest.mark.parametrize("shape,extra", G34, ids=G34_IDS)
def test_g34_half_sum_and_tma_store(shape, extra):
    """G34's forms: HALF_SUM=1 (the cluster's split summed as a reduce-scatter: each rank pushes the half of C's rows
    its partner stores and stores its own half) and STORE_T=1 (C's tile transposed into shared memory and stored by
    one TMA store; with HALF_SUM the rank's half), over full-size decode rows and ragged M / N / K with a ring turning
    over: against float64 of the e4m3 inputs, NaN-poisoned output; like for like with _scaled_mm's fast accumulation."""
    _forced_form_against_float64(shape, {"SWAP": 1, **extra}, 34)


G39 = [((96, 4096, 4096), dict(BN=64, BM=48, CLUSTER_M=2, TMA_ONLY=1, RELAXED=1)),
       ((128, 4096, 4096), dict(BN=64, BM=64, CLUSTER_M=2, TMA_ONLY=1, RELAXED=1)),
       ((112, 4096, 4096), dict(BN=64, BM=64, CLUSTER_M=2, TMA_ONLY=1, RELAXED=1)),
       ((100, 1000, 2064), dict(BN=64, BM=64, CLUSTER_M=2, STAGES=3, RELAXED=1)),
       ((7, 264, 528), dict(BN=64, CLUSTER_M=2, STAGES=2, TMA_ONLY=1, RELAXED=1))]


@pytest.mark.parametrize("shape,extra", G39, ids=[f"{m}x{n}x{k}" for (m, n, k), _ in G39])
def test_g39_relaxed_rows_cluster(shape, extra):
    """G39: the rows over a cluster of 2 sharing B by multicast (CLUSTER_M=2) with the relaxed coupling (RELAXED=1: a
    relaxed opening barrier, the producer's tail waiting for every release into its block instead of the closing
    barrier): full-size decode rows (the second row tile ragged at 112 rows), ragged M / N / K with a ring of 3 turning
    over, a row tile wholly past M: against float64 of the e4m3 inputs, NaN-poisoned output, twice (the same bits);
    like for like with _scaled_mm's fast accumulation."""
    M, N, K = shape
    g = torch.Generator(device="cuda").manual_seed(39 + M + N)
    a, sa = _quantize(torch.randn(M, K, device=DEV, generator=g))
    b, sb = _quantize(torch.randn(N, K, device=DEV, generator=g))
    p = gemm_fp8.params_for(M, N, K, SWAP=1, **extra)
    assert all(p[k] == v for k, v in extra.items()), p
    ref = (a.double() @ b.double().t()) * sa.double() * sb.double()
    outs = []
    for _ in range(2):
        out = torch.full((M, N), float("nan"), device=DEV, dtype=torch.bfloat16)
        gemm_fp8.launch(a, b, sa, sb, out, SWAP=1, **extra)
        torch.cuda.synchronize()
        assert not out.isnan().any()
        outs.append(out)
    assert torch.equal(outs[0], outs[1])
    err = float((outs[0].double() - ref).norm() / ref.norm())
    assert err <= 2.0**-8, err
    if M % 16 == 0:
        fast = torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16, use_fast_accum=True).double()
        assert err <= 1.5 * float((fast - ref).norm() / ref.norm()) + 1e-5, err
    mag = (a.double().abs() @ b.double().abs().t()) * sa.double() * sb.double()
    assert bool(((outs[0].double() - ref).abs() <= 2.0**-8 * ref.abs() + 2.0**-9 * mag).all())


def test_g34_tma_store_dropped_where_c_has_no_tensor_map():
    """STORE_T needs a tensor map of C (rows of 16-byte multiples on a 16-byte aligned base): launch stores from the
    registers otherwise (N % 8 != 0; C's base 2 bytes off 16), with the same product as the TMA store."""
    g = torch.Generator(device="cuda").manual_seed(341)
    for M, N, K in ((64, 260, 1040), (64, 264, 1040)):
        a, sa = _quantize(torch.randn(M, K, device=DEV, generator=g))
        b, sb = _quantize(torch.randn(N, K, device=DEV, generator=g))
        ref = (a.double() @ b.double().t()) * sa.double() * sb.double()
        outs = [torch.full((M, N), float("nan"), device=DEV, dtype=torch.bfloat16)]
        off = torch.full((M * N + 1,), float("nan"), device=DEV, dtype=torch.bfloat16)[1:].view(M, N)
        assert off.data_ptr() % 16
        outs.append(off)
        for out in outs:
            gemm_fp8.launch(a, b, sa, sb, out, SWAP=1, BN=64, CLUSTER_K=2, HALF_SUM=1, STORE_T=1)
        torch.cuda.synchronize()
        for out in outs:
            assert not out.isnan().any()
            assert float((out.double() - ref).norm() / ref.norm()) <= 2.0**-8
        assert torch.equal(outs[0], outs[1])


@pytest.mark.parametrize("shape", [(17, 4096, 4096), (32, 4096, 4096), (40, 4096, 4096), (64, 4096, 4096),
                                   (96, 4096, 4096), (128, 4096, 4096), (136, 4096, 4096), (200, 4096, 4096),
                                   (224, 4096, 4096), (250, 4096, 4096), (256, 4096, 4096), (128, 4096, 14336),
                                   (40, 1000, 2064)])
def test_g34_policy_through_launch(shape):
    """G34's policy through launch with no constexprs: two unsplit row tiles (one consumer) at 17-48 / 81-96 / 129-255
    rows (BM 16-128, the second tile ragged at 17 / 136 / 200 / 250 rows), HALF_SUM at 64 / 128 rows and 128 x 4096 x
    14336, STORE_T at 256 rows, the table elsewhere; against float64, like for like with _scaled_mm's fast
    accumulation."""
    M, N, K = shape
    g = torch.Generator(device="cuda").manual_seed(3400 + M)
    a, sa = _quantize(torch.randn(M, K, device=DEV, generator=g))
    b, sb = _quantize(torch.randn(N, K, device=DEV, generator=g))
    out = torch.full((M, N), float("nan"), device=DEV, dtype=torch.bfloat16)
    gemm_fp8.launch(a, b, sa, sb, out)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double().t()) * sa.double() * sb.double()
    assert not out.isnan().any()
    err = float((out.double() - ref).norm() / ref.norm())
    assert err <= 2.0**-8, err
    if M % 16 == 0:
        fast = torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16, use_fast_accum=True).double()
        assert err <= 1.5 * float((fast - ref).norm() / ref.norm()) + 1e-5, err
    mag = (a.double().abs() @ b.double().abs().t()) * sa.double() * sb.double()
    assert bool(((out.double() - ref).abs() <= 2.0**-8 * ref.abs() + 2.0**-9 * mag).all())


# H3: one row tile of all the rows (BM the e4m3 instruction N 144 / 192 / 256, past 128), 128 columns over two consumers
# unsplit (112 blocks at N = 14336: one wave where 128-row tiles made 224), and over 64 columns with the cluster's split
# summed as a reduce-scatter (HALF_SUM); full size, rows past M in A's box (224 / 200 / 160 rows), ragged N / K, a ring
# turning over, the per-element copies beside the TMA
H3 = [((192, 14336, 4096), dict(BM=192, BN=128, SPLIT_K=1, CLUSTER_K=1, TMA_ONLY=1)),
      ((256, 14336, 4096), dict(BM=256, BN=128, SPLIT_K=1, CLUSTER_K=1, TMA_ONLY=1)),
      ((224, 14336, 4096), dict(BM=256, BN=128, SPLIT_K=1, CLUSTER_K=1, TMA_ONLY=1)),
      ((200, 520, 1040), dict(BM=256, BN=128, SPLIT_K=1, STAGES=3)),
      ((160, 1000, 2064), dict(BM=192, BN=128, SPLIT_K=1, TMA_ONLY=1)),
      ((144, 264, 784), dict(BM=144, BN=128, SPLIT_K=1, TMA_ONLY=1)),
      ((192, 4096, 14336), dict(BM=192, BN=64, CLUSTER_K=2, HALF_SUM=1, TMA_ONLY=1)),
      ((256, 4096, 14336), dict(BM=256, BN=64, CLUSTER_K=2, HALF_SUM=1, TMA_ONLY=1)),
      ((200, 264, 1552), dict(BM=256, BN=64, CLUSTER_K=2, HALF_SUM=1, STAGES=3)),
      ((160, 264, 1552), dict(BM=192, BN=64, CLUSTER_K=2, HALF_SUM=1, STAGES=3, TMA_ONLY=1))]


@pytest.mark.parametrize("shape,extra", H3, ids=[f"{m}x{n}x{k}-BM{e['BM']}-BN{e['BN']}" for (m, n, k), e in H3])
def test_h3_wide_row_tiles(shape, extra):
    """H3's forms: all the rows in one tile (BM 144-256), against float64 of the e4m3 inputs, NaN-poisoned output; like
    for like with _scaled_mm's fast accumulation (16-row multiples); elementwise within half a bf16 ulp plus a share of
    the sum of |products|."""
    _forced_form_against_float64(shape, {"SWAP": 1, **extra}, 300)


@pytest.mark.parametrize("shape", [(144, 14336, 4096), (192, 14336, 4096), (208, 14336, 4096), (256, 14336, 4096),
                                   (144, 4096, 14336), (176, 4096, 14336), (224, 4096, 14336), (256, 4096, 14336)])
def test_h3_policy_through_launch(shape):
    """H3's policy rows through launch with no constexprs: one row tile of 144 rows (BM 144 since H4; BM 192 at 145-192
    rows), the large class's persistent 128 x 256 grid at 193-256 rows x 14336 x 4096 (the second row tile ragged at
    208), two unsplit row tiles with STORE_T and BM 192 over the cluster's split as HALF_SUM at K = 14336; against
    float64, like for like with _scaled_mm's fast accumulation."""
    M, N, K = shape
    g = torch.Generator(device="cuda").manual_seed(3000 + M + N)
    a, sa = _quantize(torch.randn(M, K, device=DEV, generator=g))
    b, sb = _quantize(torch.randn(N, K, device=DEV, generator=g))
    out = torch.full((M, N), float("nan"), device=DEV, dtype=torch.bfloat16)
    p = gemm_fp8.policy(M, N, K)
    assert p != gemm_fp8.swap_policy(M, N, K, h3=False)
    gemm_fp8.launch(a, b, sa, sb, out)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double().t()) * sa.double() * sb.double()
    assert not out.isnan().any()
    err = float((out.double() - ref).norm() / ref.norm())
    assert err <= 2.0**-8, err
    fast = torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16, use_fast_accum=True).double()
    assert err <= 1.5 * float((fast - ref).norm() / ref.norm()) + 1e-5, err
    mag = (a.double().abs() @ b.double().abs().t()) * sa.double() * sb.double()
    assert bool(((out.double() - ref).abs() <= 2.0**-8 * ref.abs() + 2.0**-9 * mag).all())


# H4 (H3's call 3 forms): one row tile of 144 rows (BM 144, 128 columns over two consumers, unsplit, 6 stages); one row
# tile of 256 rows swapped with 64-wide k-tiles (64-byte swizzle, a ring of 8); gemm_fp8 unswapped with one row tile of
# 256 rows as four consumers of 64 (128 columns, the registers' store). Full size (rows past M at 224) and small ragged
# (rows past M, N off the tile, K off the k-tile, rings turning over)
_I128 = gemm_fp8.SWAP_INSTR[128]
_C4 = {**gemm_fp8.PRESETS["sm_90a"], "BM": 256, "BN": 128, "CONSUMERS": 4, "STAGES": 4, "INSTR": _I128,
       "EPILOGUE": 0, "IN_FLIGHT": 1, "TMA_ONLY": 1}
_BK64 = dict(SWAP=1, BM=256, BN=128, BK=64, SWIZZLE=tp.Swizzle(2, 4, 3), STAGES=8, SPLIT_K=1, CLUSTER_K=1,
             TMA_ONLY=1)
H4 = [("bm144", (144, 14336, 4096), dict(SWAP=1, BM=144, BN=128, SPLIT_K=1, CLUSTER_K=1, TMA_ONLY=1)),
      ("bm144", (130, 520, 1040), dict(SWAP=1, BM=144, BN=128, SPLIT_K=1, CLUSTER_K=1, STAGES=3, TMA_ONLY=1)),
      ("c4", (224, 14336, 4096), _C4), ("c4", (256, 14336, 4096), _C4),
      ("c4", (200, 264, 1040), dict(_C4, STAGES=3)),
      ("bk64", (224, 14336, 4096), _BK64), ("bk64", (256, 14336, 4096), _BK64),
      ("bk64", (200, 264, 2064), _BK64)]


@pytest.mark.parametrize("name,shape,form", H4, ids=[f"{n}-{m}x{nn}x{k}" for n, (m, nn, k), _ in H4])
def test_h4_forms(name, shape, form):
    """H4's forms through launch with their constexprs: against float64 of the e4m3 inputs, NaN-poisoned output; like
    for like with _scaled_mm's fast accumulation (16-row multiples); elementwise within half a bf16 ulp plus a share of
    the sum of |products|."""
    _forced_form_against_float64(shape, form, 400)
