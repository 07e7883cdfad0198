"""Swap-AB split-K GEMM for decode shapes (stdlib_kernels/gemm_splitk_swap.py: C^T = B^T A^T, A's few rows the
wgmma instruction's N, B's tile read MN-major as its A): on the interpreter through `gemm_hopper.launch`
(SWAP_AB=1, FIXUP=3 slots summed by splitk_sum) against float64, the verifier (clean; a premature release through
the transposed operand still found), the rendered descriptor (the A transpose bit) and the launch's checks."""

import numpy as np
import pytest

import tilepy as tp
from stdlib_kernels import gemm_hopper
from stdlib_kernels.gemm_splitk_swap import gemm_splitk_swap, gemm_splitk_swap_bf16
from tilepy.dtypes import round_bf16
from tilepy.errors import ResourceError

SW = dict(SWAP_AB=1, BM=16, BN=128, CONSUMERS=2, INSTR=tp.nv.wgmma_m64n16k16_bf16, IN_FLIGHT=1, FIXUP=3)


def _launched(m: int, k: int, n: int, given: dict, out, seed: int) -> np.ndarray:
    """C = A B through gemm_hopper.launch with `given` constexprs on random bf16 A (m, k) and B (k, n), into a
    NaN-poisoned f32 C, checked against float64: every element written; f32 out within f32 sum error, bf16 out bf16
    values within bf16's half ulp of the exact product (one rounding of the f32 sum) plus the sum's error."""
    rng = np.random.default_rng(seed)
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    c = np.full((m, n), np.nan, np.float32)
    gemm_hopper.launch(a, b, c, out_dtype=out, **given)
    assert not np.isnan(c).any()
    if out == tp.f32:
        np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4)
    else:
        assert np.array_equal(c, round_bf16(c))
        np.testing.assert_allclose(c, ref, rtol=2 ** -8, atol=1e-3)
    return c


@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
@pytest.mark.parametrize(
    "m,k,n,params",
    [
        (13, 300, 200, dict(SPLIT_K=3, STAGES=3)),             # 5 k-tiles in 3 splits: the last split reads zeros
        (16, 128, 256, dict(SPLIT_K=2, STAGES=4)),             # exact tiles, fewer k-tiles than stages
        (30, 256, 130, dict(SPLIT_K=2, STAGES=2, BM=32, INSTR=tp.nv.wgmma_m64n32k16_bf16)),
        (5, 200, 2045, dict(SPLIT_K=2, STAGES=3, BN=64, CONSUMERS=1)),   # B's rows padded (4090 bytes)
        (64, 190, 70, dict(SPLIT_K=2, STAGES=2, BM=64, INSTR=tp.nv.wgmma_m64n64k16_bf16, IN_FLIGHT=0)),
        (20, 100, 256, dict(SPLIT_K=2, STAGES=2, BN=256)),     # two 64-row pieces of C^T per consumer
    ],
)
def test_swap_ab_on_the_interpreter(m, k, n, params, out):
    _launched(m, k, n, {**SW, **params}, out, m * 7 + k + n)
    plan = next(p for key, p in gemm_hopper._PLANS.items() if key[:3] == (m, n, k) and ("SWAP_AB", 1) in key)
    assert plan.summer is not None and plan.fixup and plan.params["BM"] == params.get("BM", 16)


def test_swap_ab_needs_split_k_into_slots():
    p = {**gemm_hopper.PRESETS["sm_90a"], **SW, "SPLIT_K": 4}
    kp = gemm_hopper.kernel_params(p)
    assert set(kp) <= set(gemm_hopper.SWAP_KEYS) and kp["SPLIT_K"] == 4 and "FIXUP" not in kp
    kernel, _ = gemm_hopper.plan_kernel(16, 4096, tp.bf16, p, 4096)
    assert kernel.name == "gemm_splitk_swap"
    for bad in (dict(FIXUP=0), dict(FIXUP=2), dict(PERSISTENT=1)):
        with pytest.raises(ValueError, match="SWAP_AB"):
            gemm_hopper.kernel_params({**p, **bad})
    # unsplit (C stored by the kernel) and clustered forms are legal: SPLIT_K=1 passed explicitly (the kernel's
    # default is 4), CLUSTER_M kept
    kp = gemm_hopper.kernel_params({**p, "SPLIT_K": 1, "CLUSTER_M": 2})
    assert (kp["SPLIT_K"], kp["CLUSTER_M"]) == (1, 2) and "FIXUP" not in kp
    assert gemm_hopper.kernel_params({k: v for k, v in p.items() if k != "SPLIT_K"})["SPLIT_K"] == 1


def test_swap_ab_renders_the_a_transpose():
    from tilepy_hip.render import render_kernel

    src, _, maps = render_kernel(gemm_splitk_swap.ir("sm_90a", STAGES=11, SPLIT_K=4))
    # the instruction reads A (B's tile) MN-major: trans-a 1, trans-b 0 (A's rows K-major as the instruction's B)
    assert "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16" in src and "p, 1, 1, 1, 0;" in src
    # A's descriptor: B's 64-column blocks 8192 bytes apart (leading byte offset), 8-row groups 1024 apart, 128-byte
    # swizzle; a k-step of 16 rows advances it 2048 bytes (1024 elements)
    assert ", 8192, 1024, 1);" in src and "+ 1024)) * 2, 8192, 1024, 1);" in src
    assert [(s.param, s.box) for s in maps] == [("A", (64, 16)), ("B", (64, 64))]


def test_a_transposed_operand_is_refused_for_k_major_only_formats():
    from tilepy_hip.render import render_kernel

    @tp.kernel(threads=128, target="sm_90a")
    def tf32_mn_major(X: tp.Tensor[tp.f32, "K", "M"], Y: tp.Tensor[tp.f32, "N", "K"], C: tp.Tensor[tp.f32, "M", "N"]):
        x_s = tp.shared((32, 64), tp.f32, swizzle=tp.Swizzle(3, 2, 3), layout=tp.Layout((32, (32, 2)), (32, (1, 1024))))
        y_s = tp.shared((16, 32), tp.f32, swizzle=tp.Swizzle(3, 2, 3))
        bar = tp.mbarrier(1)
        tp.copy_bulk(X[0:32, 0:64], x_s, bar)
        tp.copy_bulk(Y[0:16, 0:32], y_s, bar)
        tp.mbarrier_arrive(bar)
        tp.mbarrier_wait(bar, 0)
        acc = tp.zeros((64, 16), tp.f32, layout=tp.accumulator(tp.nv.wgmma_m64n16k8_tf32, (64, 16), (1, 1)))
        acc = tp.mma(x_s.T, y_s.T, acc)
        tp.store(C[0:64, 0:16], acc)

    with pytest.raises(Exception, match="K-major"):
        render_kernel(tf32_mn_major.ir("sm_90a"))


def test_swap_ab_verifies_clean_and_a_premature_release_is_found():
    import time

    import tilepy_verify as tv

    for kernel in (gemm_splitk_swap, gemm_splitk_swap_bf16):
        for p in (dict(STAGES=11, SPLIT_K=4), dict(BM=64, INSTR=tp.nv.wgmma_m64n64k16_bf16, STAGES=8, SPLIT_K=2),
                  dict(BN=64, CONSUMERS=1, STAGES=6, SPLIT_K=2, IN_FLIGHT=0)):
            t = time.perf_counter()
            report = tv.verify(kernel, target="sm_90a", **p)
            assert report.findings == [], [f.message for f in report.findings]
            assert time.perf_counter() - t < 30      # (0.3-1.1 s idle; a hang guard under load, not a benchmark)
    report = tv.verify(_premature_release, target="sm_90a")
    assert [f.check for f in report.findings] == ["pipeline_hazard"], [str(f) for f in report.findings]


@tp.kernel(threads=256, target="sm_90a")
def _premature_release(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"],
                       WS: tp.Tensor[tp.f32, "WR", "WC"], STAGES: tp.constexpr = 4):
    """gemm_splitk_swap's ring with the seeded bug: the stage of tile k released right after its asynchronous wgmma
    is issued (it should be tile k - 1's, after tp.mma_wait(1) retires that group)."""
    m0 = tp.block_id(0) * 16
    n0 = tp.block_id(1) * 64
    a_s = tp.shared((16, 64), tp.bf16, stages=STAGES, swizzle=tp.Swizzle(3, 3, 3))
    b_s = tp.shared((64, 64), tp.bf16, stages=STAGES, swizzle=tp.Swizzle(3, 3, 3),
                    layout=gemm_hopper.b_layout(64, 64))
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    k_tiles = tp.cdiv(A.shape[1], 64)
    if tp.warpgroup_id() == 0:
        for k in range(k_tiles):
            tp.mbarrier_wait(empty[k % STAGES], k // STAGES)
            tp.copy_bulk(A[m0:m0 + 16, k * 64:k * 64 + 64], a_s[k % STAGES], full[k % STAGES])
            tp.copy_bulk(B[k * 64:k * 64 + 64, n0:n0 + 64], b_s[k % STAGES], full[k % STAGES])
            tp.mbarrier_arrive(full[k % STAGES])
    else:
        acc = tp.zeros((64, 16), tp.f32, layout=tp.accumulator(tp.nv.wgmma_m64n16k16_bf16, (64, 16), (1, 1)))
        for s in tp.static_range(STAGES):
            tp.mbarrier_arrive(empty[s])
        for k in range(k_tiles):
            tp.mbarrier_wait(full[k % STAGES], k // STAGES)
            acc = tp.mma_async(b_s[k % STAGES].T, a_s[k % STAGES].T, acc)
            tp.mbarrier_arrive(empty[k % STAGES])      # BUG: its group may still read the stage
            tp.mma_wait(1)
        tp.mma_wait(0)
        tp.store(WS[m0:m0 + 16, n0:n0 + 64], acc.T)


def test_g8_policy_forms_for_launch_only():
    """The forms `launch` runs (swap-AB for decode and skinny rows, 2x1 clusters for B rows that are not whole 128-byte
    lines) come with fixup=True only; the lowering's policy (fixup=False) never has them."""
    for m, n, bm in ((1, 4096, 8), (16, 4096, 16), (17, 4096, 24), (32, 4096, 32), (1, 8192, 16), (16, 8192, 16)):
        p = gemm_hopper.policy(m, n, 4096, tp.bf16, fixup=True)
        # 1-32 rows at N ~ 4096 (G14, G19 below 17): both consumers over one 64-column tile on alternate k-tiles
        # (K_WAYS=2), K split over a cluster's two blocks (CLUSTER_K=2: no slots); 16 rows at N = 8192 (past the
        # cluster split's N): BN 128 over two consumers, split 2 into slots
        bn, split, kw, ck = (64, 1, 2, 2) if n == 4096 else (128, 2, 1, 1)
        assert (p["SWAP_AB"], p["BM"], p["BN"], p["CONSUMERS"], p["SPLIT_K"]) == (1, bm, bn, 2, split)
        assert p.get("FIXUP") == (3 if split > 1 else None) and p.get("CLUSTER_K", 1) == ck
        assert p.get("K_WAYS", 1) == kw and gemm_hopper.grid_of(m, n, p) == (1, n // bn, split * ck)
        assert gemm_hopper.kernel_params(p)["INSTR"].n == bm
        assert "SWAP_AB" not in gemm_hopper.policy(m, n, 4096, tp.bf16)                 # the lowering's
    assert "SWAP_AB" not in gemm_hopper.policy(48, 1024, 4096, fixup=True)     # 16 column tiles: gemm_splitk
    assert "SWAP_AB" not in gemm_hopper.policy(16, 14336, 4096, fixup=True)                 # 112 tiles: no split
    assert gemm_hopper.policy(16, 2048, 14336, fixup=True)["SPLIT_K"] == 8     # (16 x 4096 x 14336: the cluster split)
    assert gemm_hopper.policy(16, 512, 65536, fixup=True)["SPLIT_K"] == gemm_hopper.MAX_SLOTS   # the unrolled sum
    for out in (tp.bf16, tp.f32):
        sk = gemm_hopper.policy(256, 4096, 4096, out, fixup=True)     # (G27: two swap-AB row tiles, not clusters)
        assert not gemm_hopper.clustered(sk) and (sk["SWAP_AB"], sk["K_WAYS"], sk["BM"]) == (1, 2, 128)
        assert not gemm_hopper.clustered(gemm_hopper.policy(256, 4096, 4096, out))
        assert not gemm_hopper.clustered(gemm_hopper.policy(200, 4096, 4096, out, fixup=True))
        pitch = gemm_hopper.policy(3000, 5000, 4096, out, fixup=True)       # B rows of 10000 bytes
        assert pitch["CLUSTER_M"] == (2 if out == tp.bf16 else 4) and pitch["BN"] == 256 and "SPLIT_K" not in pitch
        assert not gemm_hopper.clustered(gemm_hopper.policy(3000, 5000, 4096, out))
        assert not gemm_hopper.clustered(gemm_hopper.policy(4096, 4096, 4104, out, fixup=True))   # A's rows: no
        assert not gemm_hopper.clustered(gemm_hopper.policy(4096, 4096, 4096, out, fixup=True))
        assert not gemm_hopper.clustered(gemm_hopper.policy(2051, 2045, 1000, out, fixup=True))   # padded instead
        # mid-size (128 x 256 tiles would split): 128 x 128 tiles in one wave, no split, launch and lowering alike
        for fixup in (False, True):
            mid = gemm_hopper.policy(2048, 1024, 1024, out, fixup=fixup)
            assert (mid["BM"], mid["BN"], mid.get("SPLIT_K", 1), mid["IN_FLIGHT"]) == (128, 128, 1, 0)
            assert (mid["STAGES"], mid["EPILOGUE"]) == ((5, 2) if out == tp.bf16 else (4, 0))
            assert "PRODUCER_REGS" not in mid
        assert gemm_hopper.policy(2048, 2048, 1024, out)["BN"] == 256                     # 128 big tiles: as before


def test_a_callers_constexprs_get_the_policy_without_swap_ab():
    rng = np.random.default_rng(3)
    m, k, n = 16, 1024, 256
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert gemm_hopper.policy(m, n, k, tp.f32, fixup=True)["SWAP_AB"] == 1
    gemm_hopper._PLANS.clear()
    for given, swapped in ((dict(), True), (dict(STAGES=3), False), (dict(SPLIT_K=2), False)):
        c = np.full((m, n), np.nan, np.float32)
        gemm_hopper.launch(a, b, c, **given)
        np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4)
        plan = gemm_hopper._PLANS[(m, n, k, c.dtype, None, "sm_90a", *given.items())]
        assert (plan.params["BM"] == 16) == swapped and ("INSTR" in plan.params)
        assert (plan.params["INSTR"].n == 16) == swapped          # otherwise gemm_splitk / gemm_hopper's 64 x 128


SWC = dict(SWAP_AB=1, IN_FLIGHT=1, FIXUP=3, SPLIT_K=1, CLUSTER_M=2, CONSUMERS=1, BN=64,
           INSTR=tp.nv.wgmma_m64n16k16_bf16)


@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
@pytest.mark.parametrize(
    "m,k,n,params",
    [
        (30, 300, 200, dict(BM=16, STAGES=3)),                        # 2 row tiles, one cluster, B multicast
        (45, 256, 130, dict(BM=16, STAGES=3, SPLIT_K=2, IN_FLIGHT=0)),  # 3 row tiles: the grid rounded up to 4
        (70, 190, 136, dict(BM=32, INSTR=tp.nv.wgmma_m64n32k16_bf16, STAGES=3, BN=128, CONSUMERS=2)),
        (100, 200, 2045, dict(BM=64, INSTR=tp.nv.wgmma_m64n64k16_bf16, STAGES=2)),   # B's rows padded
        (20, 200, 130, dict(BM=16, STAGES=2, CLUSTER_M=1)),           # unsplit, no cluster
    ],
)
def test_swap_ab_clusters_and_unsplit_on_the_interpreter(m, k, n, params, out):
    """gemm_splitk_swap in clusters of CLUSTER_M row tiles (B's tile multicast to them) and unsplit (C stored by the
    kernel, no slots or sum), through launch, against float64; NaN-poisoned output."""
    given = {**SWC, **params}
    c = _launched(m, k, n, given, out, m * 3 + k + n)
    plan = gemm_hopper._PLANS[(m, n, k, c.dtype, out, "sm_90a", *given.items())]
    assert (plan.summer is not None) == (given["SPLIT_K"] > 1)
    assert plan.params.get("CLUSTER_M", 1) == given["CLUSTER_M"]


@pytest.mark.parametrize("split", [1, 3])
def test_swap_ab_b_given_as_nk_on_the_interpreter(split):
    """B_NK=1: B an (N, K) weight (an nn.Linear's, read in place) staged K-major, the instruction's A as it is."""
    from stdlib_kernels.gemm_splitk_swap import gemm_splitk_swap_nk, gemm_splitk_swap_nk_bf16

    rng = np.random.default_rng(split)
    m, k, n = 45, 300, 136
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    w = round_bf16(rng.standard_normal((n, k)).astype(np.float32))
    ref = a.astype(np.float64) @ w.astype(np.float64).T
    p = {**gemm_hopper.PRESETS["sm_90a"], **SWC, "BM": 16, "STAGES": 3, "SPLIT_K": split, "B_NK": 1}
    kp = gemm_hopper.kernel_params(p)
    c = np.full((m, n), np.nan, np.float32)
    if split == 1:      # bf16 out, C stored by the kernel (numpy float32 standing for bf16: rounded values)
        gemm_splitk_swap_nk_bf16[gemm_hopper.grid_of(m, n, p)](a, w, c, np.zeros((1, 1), np.float32),
                                                               np.zeros(1, np.int32), target="sm_90a", **kp)
        assert np.array_equal(c, round_bf16(c))
        np.testing.assert_allclose(c, ref, rtol=2 ** -8, atol=1e-3)
    else:
        ws = np.zeros(gemm_hopper.workspace_shapes(m, n, p)[0], np.float32)
        gemm_splitk_swap_nk[gemm_hopper.grid_of(m, n, p)](a, w, c, ws, np.zeros(1, np.int32), target="sm_90a", **kp)
        gemm_hopper.splitk_sum[(gemm_hopper._cdiv(m, 8), gemm_hopper._cdiv(n, 128))](ws, c, SPLIT_K=split,
                                                                                       target="sm_90a")
        np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4)


def test_swap_ab_cluster_forms_verify_clean_in_budget():
    """The cluster / unsplit / B_NK forms the sweep times, each verified clean (the 2 s budget is the CPU figure at
    rest: 0.3-1.4 s here; 30 s is a hang guard under load, not a benchmark)."""
    import time

    import tilepy_verify as tv
    from stdlib_kernels.gemm_splitk_swap import gemm_splitk_swap_nk_bf16

    i32, i64 = tp.nv.wgmma_m64n32k16_bf16, tp.nv.wgmma_m64n64k16_bf16
    for kernel, p in ((gemm_splitk_swap_bf16, dict(BM=16, BN=64, CONSUMERS=1, STAGES=16, SPLIT_K=1, CLUSTER_M=2)),
                      (gemm_splitk_swap, dict(BM=32, INSTR=i32, BN=64, CONSUMERS=1, STAGES=14, SPLIT_K=1, CLUSTER_M=2,
                                              IN_FLIGHT=0)),
                      (gemm_splitk_swap, dict(BM=64, INSTR=i64, BN=64, CONSUMERS=1, STAGES=12, SPLIT_K=1, CLUSTER_M=2)),
                      (gemm_splitk_swap, dict(BM=16, BN=128, CONSUMERS=2, STAGES=12, SPLIT_K=2, CLUSTER_M=2)),
                      (gemm_splitk_swap_nk_bf16, dict(BM=16, BN=64, CONSUMERS=1, STAGES=16, SPLIT_K=1, CLUSTER_M=2,
                                                      B_NK=1))):
        t = time.perf_counter()
        report = tv.verify(kernel, target="sm_90a", **p)
        assert report.findings == [], [f.message for f in report.findings]
        assert time.perf_counter() - t < 30
    report = tv.verify(_local_release_only, target="sm_90a")
    assert report.findings, "a stage released to its own block only, while a multicast writes both, went unseen"


@tp.kernel(threads=256, target="sm_90a", cluster=(2, 1, 1))
def _local_release_only(A: tp.Tensor[tp.bf16, "M", "K"], B: tp.Tensor[tp.bf16, "K", "N"],
                        C: tp.Tensor[tp.f32, "M", "N"], STAGES: tp.constexpr = 3):
    """The cluster form with the seeded bug: each block's consumers release a stage on their own block's `empty`
    only, so a producer may multicast B's next tile into the other block's stage while its consumers read it."""
    m0 = tp.block_id(0) * 16
    n0 = tp.block_id(1) * 64
    a_s = tp.shared((16, 64), tp.bf16, stages=STAGES, swizzle=tp.Swizzle(3, 3, 3))
    b_s = tp.shared((64, 64), tp.bf16, stages=STAGES, swizzle=tp.Swizzle(3, 3, 3),
                    layout=gemm_hopper.b_layout(64, 64))
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    k_tiles = tp.cdiv(A.shape[1], 64)
    tp.cluster_sync()
    if tp.warpgroup_id() == 0:
        for k in range(k_tiles):
            tp.mbarrier_wait(empty[k % STAGES], k // STAGES)
            tp.copy_bulk(A[m0:m0 + 16, k * 64:k * 64 + 64], a_s[k % STAGES], full[k % STAGES])
            tp.copy_bulk(B[k * 64:k * 64 + 64, n0:n0 + 64], b_s[k % STAGES], full[k % STAGES], multicast=3,
                         by=k % 2)
            tp.mbarrier_arrive(full[k % STAGES])
    else:
        acc = tp.zeros((64, 16), tp.f32, layout=tp.accumulator(tp.nv.wgmma_m64n16k16_bf16, (64, 16), (1, 1)))
        for s in tp.static_range(STAGES):
            tp.mbarrier_arrive(empty[s])
        for k in range(k_tiles):
            tp.mbarrier_wait(full[k % STAGES], k // STAGES)
            acc = tp.mma(b_s[k % STAGES].T, a_s[k % STAGES].T, acc)
            tp.mbarrier_arrive(empty[k % STAGES])      # BUG: the other block's producer multicasts here too
        tp.store(C[m0:m0 + 16, n0:n0 + 64], acc.T)
    tp.cluster_sync()


KW = dict(SWAP_AB=1, K_WAYS=2, CONSUMERS=2, BN=64, IN_FLIGHT=1, FIXUP=3, SPLIT_K=1, INSTR=tp.nv.wgmma_m64n16k16_bf16)


@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
@pytest.mark.parametrize(
    "m,k,n,params",
    [
        (13, 300, 200, dict(BM=16, STAGES=2, SPLIT_K=3)),     # 5 k-tiles: 2 per split rounded up, zeros past K
        (30, 330, 130, dict(BM=32, INSTR=tp.nv.wgmma_m64n32k16_bf16, STAGES=2)),   # 6 k-tiles, unsplit
        (45, 300, 136, dict(BM=16, STAGES=2, CLUSTER_M=2)),   # 3 row tiles in clusters; 5 k-tiles: ring 1's last
        (70, 190, 2045, dict(BM=64, INSTR=tp.nv.wgmma_m64n64k16_bf16, STAGES=2, IN_FLIGHT=0)),   # B rows padded
        (20, 520, 256, dict(BM=16, BN=128, STAGES=3, SPLIT_K=2)),   # two 64-row pieces in each consumer's tile
        (130, 200, 100, dict(BM=128, INSTR=tp.nv.wgmma_m64n128k16_bf16, STAGES=2, CLUSTER_M=2, IN_FLIGHT=0)),
    ],
)
def test_k_ways_on_the_interpreter(m, k, n, params, out):
    """K_WAYS=2: two consumer warpgroups over one tile of C^T, consumer r taking the k-tiles 2j + r from ring r into
    an accumulator of its own, consumer 1's sum handed to consumer 0 through shared memory: through launch against
    float64 on ragged shapes (odd k-tile counts, a split's count rounded up to even, clusters, padded B rows, both
    wait_group forms), NaN-poisoned output."""
    given = {**KW, **params}
    c = _launched(m, k, n, given, out, m * 5 + k + n)
    plan = gemm_hopper._PLANS[(m, n, k, c.dtype, out, "sm_90a", *given.items())]
    assert plan.params["K_WAYS"] == 2 and (plan.summer is not None) == (given["SPLIT_K"] > 1)


def test_k_ways_one_consumer_alone_is_not_the_product():
    """Each consumer holds half of the k-tiles: with the hand-over dropped (consumer 0's tile alone), the result
    is the even k-tiles' sum, far from the product (the test above would see a missing half)."""
    rng = np.random.default_rng(11)
    m, k, n = 16, 256, 64
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    even = sum(a[:, j * 64:(j + 1) * 64].astype(np.float64) @ b[j * 64:(j + 1) * 64].astype(np.float64)
               for j in (0, 2))
    full = a.astype(np.float64) @ b.astype(np.float64)
    c = np.full((m, n), np.nan, np.float32)
    gemm_hopper.launch(a, b, c, **{**KW, "BM": 16, "STAGES": 2})
    np.testing.assert_allclose(c, full, rtol=1e-5, atol=1e-4)
    assert np.abs(c - even).max() > 1.0


def test_k_ways_needs_two_consumers_and_64_row_tiles():
    p = {**gemm_hopper.PRESETS["sm_90a"], **KW, "BM": 16}
    assert gemm_hopper.kernel_params(p)["K_WAYS"] == 2
    for bad in (dict(CONSUMERS=1), dict(BN=96), dict(K_WAYS=3)):
        with pytest.raises(ValueError, match="K_WAYS"):
            gemm_hopper.kernel_params({**p, **bad})


def test_k_ways_verifies_clean_and_renders_tma_only():
    """The K_WAYS=2 forms verify clean (two plain rings: the verifier proves each consumer's; 2 s is the figure at
    rest, 30 s a hang guard under load), and the copies are TMA only (no per-element fallback compiled in)."""
    import time

    import tilepy_verify as tv
    from stdlib_kernels.gemm_splitk_swap import gemm_splitk_swap_nk
    from tilepy_hip.render import render_kernel

    i32, i64 = tp.nv.wgmma_m64n32k16_bf16, tp.nv.wgmma_m64n64k16_bf16
    kw = dict(K_WAYS=2, CONSUMERS=2, BN=64)
    for kernel, p in ((gemm_splitk_swap, dict(kw, BM=16, STAGES=8, SPLIT_K=2)),
                      # (the cluster forms at 4 stages: at 8 their verification took 5-7 s on a loaded 2-core machine,
                      # 60 s under pytest -n 4 there; the rings' proof is the same for any stage count)
                      (gemm_splitk_swap_bf16, dict(kw, BM=16, STAGES=4, SPLIT_K=1, CLUSTER_M=2)),
                      (gemm_splitk_swap, dict(kw, BM=32, INSTR=i32, STAGES=4, SPLIT_K=1, IN_FLIGHT=0, CLUSTER_M=2)),
                      (gemm_splitk_swap_nk, dict(kw, BM=64, INSTR=i64, STAGES=6, SPLIT_K=2, B_NK=1))):
        t = time.perf_counter()
        report = tv.verify(kernel, target="sm_90a", **p)
        assert report.findings == [], [str(f) for f in report.findings]
        assert time.perf_counter() - t < 30
    src, _, maps = render_kernel(gemm_splitk_swap.ir("sm_90a", **kw, BM=16, STAGES=8, SPLIT_K=2))
    assert src.count("tp_tma_load_2d(") == 4 and "tp_aligned(" not in src    # A and B per ring, no fallback
    assert "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16" in src


def test_k_ways_policy_rows():
    """`launch`'s policy takes K_WAYS=2 (swap-AB, 64 x 64 tiles of C^T, unsplit, the last row tile shifted back to end
    at M) for 65-128 rows whose tiles fill half a wave to one (measured: 72-128 x 4096 x 4096) where K is too short for
    G14's split over a cluster (< 8 k-tiles; with more, test_cluster_k_policy_rows), and split over 64 x 32 tiles at 32
    rows where the cluster split does not apply (not 20 rows, where it lost); nowhere else."""
    for out in (tp.f32, tp.bf16):
        for m in (32,):     # (32 column tiles: too few for the cluster split's half wave; split 4 into slots)
            p = gemm_hopper.policy(m, 2048, 4096, out, fixup=True)
            assert (p["K_WAYS"], p["BM"], p["BN"], p["SPLIT_K"], p["FIXUP"]) == (2, 32, 64, 4, 3)
            assert p.get("CLUSTER_K", 1) == 1
        for m in (65, 80, 97, 100, 128):
            p = gemm_hopper.policy(m, 4096, 448, out, fixup=True)
            assert (p["SWAP_AB"], p["K_WAYS"], p["BM"], p["BN"], p["CONSUMERS"], p["SPLIT_K"]) == (1, 2, 64, 64, 2, 1)
            assert gemm_hopper.kernel_params(p)["M_SHIFT"] == 1 and p.get("CLUSTER_K", 1) == 1
            assert gemm_hopper.grid_of(m, 4096, p) == (2, 64, 1)
            assert "K_WAYS" not in gemm_hopper.policy(m, 4096, 448, out, fixup=True, forms=False)
            assert "K_WAYS" not in gemm_hopper.policy(m, 4096, 4096, out)          # gemm_hopper's own callers
        for m, n in ((128, 14336), (257, 4096), (64, 1024), (16, 8192), (128, 1024), (1024, 1024)):
            k = 1024 if m == 1024 else 4096      # (1024 x 1024 x 2048 and up: SMALL_KWAYS, from 32 k-tiles, G33)
            assert gemm_hopper.policy(m, n, k, out, fixup=True).get("K_WAYS", 1) == 1, (m, n)


@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
@pytest.mark.parametrize("m,k,n,params", [
    (80, 300, 200, dict(BM=64, INSTR=tp.nv.wgmma_m64n64k16_bf16, STAGES=2)),             # 2 tiles, the last at 16
    (100, 256, 130, dict(BM=64, INSTR=tp.nv.wgmma_m64n64k16_bf16, STAGES=2, SPLIT_K=2)),  # shifted into slots
    (45, 200, 136, dict(BM=16, STAGES=2, CLUSTER_M=2)),       # 3 tiles + the cluster's 4th: nothing of its own
    (64, 200, 136, dict(BM=64, INSTR=tp.nv.wgmma_m64n64k16_bf16, STAGES=2)),             # whole tiles: no shift
])
def test_k_ways_last_row_tile_shifted(m, k, n, params, out):
    """M_SHIFT=1: the last row tile ends at M (its A box wholly inside A); its rows below the tile's own first row
    are the previous tile's, computed twice and stored once: against float64, NaN-poisoned C."""
    _launched(m, k, n, {**KW, "M_SHIFT": 1, **params}, out, m + k + n)


def test_k_ways_shifted_tile_verifies_clean_and_an_unmasked_overlap_is_found():
    import tilepy_verify as tv

    i64 = tp.nv.wgmma_m64n64k16_bf16
    for kernel, p in ((gemm_splitk_swap_bf16, dict(SPLIT_K=1)), (gemm_splitk_swap, dict(SPLIT_K=2))):
        report = tv.verify(kernel, target="sm_90a", K_WAYS=2, CONSUMERS=2, BN=64, BM=64, INSTR=i64, STAGES=6,
                           M_SHIFT=1, **p)
        assert report.findings == [], [str(f) for f in report.findings]
    report = tv.verify(_shifted_unmasked, target="sm_90a")
    assert [f.check for f in report.findings] == ["global_race"], [str(f) for f in report.findings]


@tp.kernel(threads=128, target="sm_90a")
def _shifted_unmasked(X: tp.Tensor[tp.f32, "M", 64], C: tp.Tensor[tp.f32, "M", 64]):
    """The shifted last row tile with the seeded bug: its rows that the previous tile owns stored again."""
    m0 = tp.minimum(tp.block_id(0) * 64, X.shape[0] - 64)
    tp.store(C[m0:m0 + 64, 0:64], tp.load(X[m0:m0 + 64, 0:64]) * 2.0)     # BUG: no mask for rows below block * 64


CK = dict(KW, FIXUP=0, CLUSTER_K=2)


@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
@pytest.mark.parametrize("m,k,n,bm,params", [
    (32, 700, 200, 32, dict(STAGES=3)),            # 11 k-tiles: 6 per rank (even), rank 1 reads zeros past K
    (13, 200, 2045, 16, dict(STAGES=2)),           # B's rows padded; 4 k-tiles, 2 per rank
    (45, 520, 130, 48, dict(STAGES=2)),            # wgmma n48, one row tile
    (80, 300, 70, 80, dict(STAGES=2)),             # n80: A's box ends at M
    (100, 264, 136, 104, dict(STAGES=2)),          # n104; 5 k-tiles: rank 1 one real tile and zeros
    (130, 330, 64, 64, dict(STAGES=2, M_SHIFT=1)),   # three row tiles, the last shifted back to end at M
    (5, 330, 130, 8, dict(STAGES=2)),              # n8: 3 of 8 rows past M
])
@pytest.mark.parametrize("push", [0, 1])
def test_cluster_k_on_the_interpreter(m, k, n, bm, params, out, push):
    """CLUSTER_K=2: K split over the two blocks of a cluster (grid z), rank 1's sum read by rank 0 from its shared
    memory (tp.load(..., cta=1)) between two cluster barriers; C stored once, no slots, no splitk_sum: against float64
    on ragged shapes, NaN-poisoned C. PUSH=1 (G19): each rank's sum pushed into the other's `recv` by
    tp.store_remote, each rank storing half the tile's columns (C still written whole: no NaN left)."""
    given = {**CK, **params, "BM": bm, "INSTR": getattr(tp.nv, f"wgmma_m64n{bm}k16_bf16"), "PUSH": push}
    c = _launched(m, k, n, given, out, m * 3 + k + n)
    plan = gemm_hopper._PLANS[(m, n, k, c.dtype, out, "sm_90a", *given.items())]
    assert plan.summer is None and plan.params["CLUSTER_K"] == 2
    assert gemm_hopper.grid_of(m, n, given)[2] == 2


def test_cluster_k_rank_zero_alone_is_not_the_product():
    """Each rank holds half of K: rank 0's own half is far from the product (the tests above would see a missing
    remote sum)."""
    rng = np.random.default_rng(3)
    m, k, n = 16, 512, 64
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    half = a[:, :256].astype(np.float64) @ b[:256].astype(np.float64)
    c = np.full((m, n), np.nan, np.float32)
    gemm_hopper.launch(a, b, c, **{**CK, "BM": 16, "STAGES": 2})
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-4)
    assert np.abs(c - half).max() > 1.0


def test_cluster_k_needs_k_ways_and_no_other_split():
    p = {**gemm_hopper.PRESETS["sm_90a"], **CK, "BM": 16}
    assert gemm_hopper.kernel_params(p)["CLUSTER_K"] == 2
    for bad in (dict(K_WAYS=1, CONSUMERS=1), dict(SPLIT_K=2, FIXUP=3), dict(CLUSTER_M=2), dict(CLUSTER_K=4)):
        with pytest.raises(ValueError, match="CLUSTER_K"):
            gemm_hopper.kernel_params({**p, **bad})
    with pytest.raises(ValueError, match="PUSH=1"):
        gemm_hopper.kernel_params({**p, "CLUSTER_K": 1, "PUSH": 1})
    with pytest.raises(ValueError, match="XCH=1"):
        gemm_hopper.kernel_params({**p, "XCH": 1})


def test_cluster_k_verifies_clean_and_renders_the_remote_load():
    """The CLUSTER_K forms verify clean (2 s at rest; 30 s a hang guard under load); the remote load goes through
    mapa's generic address; a kernel reading another block's tile without a cluster barrier before it, or without one
    after it, is reported (race)."""
    import time

    import tilepy_verify as tv
    from stdlib_kernels.gemm_splitk_swap import gemm_splitk_swap_nk
    from tilepy_hip.render import render_kernel

    i32, i80 = tp.nv.wgmma_m64n32k16_bf16, tp.nv.wgmma_m64n80k16_bf16
    kw = dict(K_WAYS=2, CONSUMERS=2, BN=64, SPLIT_K=1, CLUSTER_K=2)
    for kernel, p in ((gemm_splitk_swap_bf16, dict(kw, BM=32, INSTR=i32, STAGES=8)),
                      (gemm_splitk_swap, dict(kw, BM=80, INSTR=i80, STAGES=5)),
                      (gemm_splitk_swap, dict(kw, BM=64, INSTR=tp.nv.wgmma_m64n64k16_bf16, STAGES=6, M_SHIFT=1)),
                      (gemm_splitk_swap_nk, dict(kw, BM=32, INSTR=i32, STAGES=8, B_NK=1))):
        t = time.perf_counter()
        report = tv.verify(kernel, target="sm_90a", **p)
        assert report.findings == [], [str(f) for f in report.findings]
        assert time.perf_counter() - t < 30
    src, _, _ = render_kernel(gemm_splitk_swap.ir("sm_90a", **kw, BM=32, INSTR=i32, STAGES=8))
    assert src.count("tp_mapa(red, 1)") == 1 and src.count("tp_cluster_sync()") == 1
    assert src.count("tp_cluster_sync_relaxed()") == 1     # the closing barrier (G14 call 5: -0.6 us)
    # PUSH=1 (G19): verifies clean; the sums move by 16-byte st.async, one arrive.expect_tx of the whole tile
    # (BN x BM f32), no remote load, only the opening (relaxed) cluster barrier
    for kernel, p in ((gemm_splitk_swap_bf16, dict(kw, BM=32, INSTR=i32, STAGES=8, PUSH=1)),
                      (gemm_splitk_swap, dict(kw, BM=104, INSTR=tp.nv.wgmma_m64n104k16_bf16, STAGES=4, PUSH=1)),
                      (gemm_splitk_swap, dict(kw, BM=64, INSTR=tp.nv.wgmma_m64n64k16_bf16, STAGES=6, M_SHIFT=1,
                                              PUSH=1))):
        t = time.perf_counter()
        report = tv.verify(kernel, target="sm_90a", **p)
        assert report.findings == [], [str(f) for f in report.findings]
        assert time.perf_counter() - t < 30
    src, _, _ = render_kernel(gemm_splitk_swap.ir("sm_90a", **kw, BM=32, INSTR=i32, STAGES=8, PUSH=1))
    assert src.count("tp_st_async4(") == 4 and "tp_st_async1(" not in src and "tp_mapa(" not in src
    assert src.count("tp_mbar_arrive_expect_tx_remote(") == 1 and f"{64 * 32 * 4}u" in src
    assert src.count("tp_cluster_sync_relaxed()") == 1 and "tp_cluster_sync()" not in src
    for kernel in (_remote_before_sync, _remote_without_last_sync, _remote_relaxed_before_store,
                   _remote_relaxed_opening):
        report = tv.verify(kernel, target="sm_90a")
        assert [f.check for f in report.findings] == ["race"], (kernel.name, [str(f) for f in report.findings])
    assert tv.verify(_remote_relaxed_closing, target="sm_90a").findings == []


def test_remote_load_needs_a_cluster_and_a_shared_rank():
    import tilepy.errors as te

    with pytest.raises(te.KernelTypeError, match="no cluster"):
        _remote_no_cluster.ir("sm_90a")
    with pytest.raises(te.KernelTypeError, match="cluster rank"):
        _remote_rank_out_of_range.ir("sm_90a")


@tp.kernel(threads=128, target="sm_90a", cluster=(2, 1, 1))
def _remote_before_sync(X: tp.Tensor[tp.f32, "N", 128], Y: tp.Tensor[tp.f32, "N", 128]):
    s = tp.shared((128,), tp.f32)
    tp.store(s, tp.load(X[tp.block_id(0), 0:128]))
    tp.barrier()                # (the block's own threads: ordered)
    v = tp.load(s, cta=1)       # seeded bug: no cluster barrier between the other block's store and this load
    tp.cluster_sync()
    tp.store(Y[tp.block_id(0), 0:128], v)


@tp.kernel(threads=128, target="sm_90a", cluster=(2, 1, 1))
def _remote_without_last_sync(X: tp.Tensor[tp.f32, "N", 128], Y: tp.Tensor[tp.f32, "N", 128]):
    s = tp.shared((128,), tp.f32)
    tp.store(s, tp.load(X[tp.block_id(0), 0:128]))
    tp.cluster_sync()
    v = tp.load(s, cta=1)       # seeded bug: the other block may exit (its shared memory gone) while this reads
    tp.store(Y[tp.block_id(0), 0:128], v)


@tp.kernel(threads=128, target="sm_90a", cluster=(2, 1, 1))
def _remote_relaxed_closing(X: tp.Tensor[tp.f32, "N", 128], Y: tp.Tensor[tp.f32, "N", 128]):
    s = tp.shared((128,), tp.f32)
    tp.store(s, tp.load(X[tp.block_id(0), 0:128]))
    tp.cluster_sync()
    v = tp.load(s, cta=1)
    tp.store(Y[tp.block_id(0), 0:128], v)
    tp.cluster_sync(relaxed=True)   # the loaded value is stored before it: the read has returned


@tp.kernel(threads=128, target="sm_90a", cluster=(2, 1, 1))
def _remote_relaxed_before_store(X: tp.Tensor[tp.f32, "N", 128], Y: tp.Tensor[tp.f32, "N", 128]):
    s = tp.shared((128,), tp.f32)
    tp.store(s, tp.load(X[tp.block_id(0), 0:128]))
    tp.cluster_sync()
    v = tp.load(s, cta=1)
    tp.cluster_sync(relaxed=True)   # seeded bug: the read may still be in flight when the other block exits
    tp.store(Y[tp.block_id(0), 0:128], v)


@tp.kernel(threads=128, target="sm_90a", cluster=(2, 1, 1))
def _remote_relaxed_opening(X: tp.Tensor[tp.f32, "N", 128], Y: tp.Tensor[tp.f32, "N", 128]):
    s = tp.shared((128,), tp.f32)
    tp.store(s, tp.load(X[tp.block_id(0), 0:128]))
    tp.barrier()
    tp.cluster_sync(relaxed=True)   # seeded bug: no release / acquire, the other block's tile is not published
    v = tp.load(s, cta=1)
    tp.store(Y[tp.block_id(0), 0:128], v)
    tp.cluster_sync()


@tp.kernel(threads=128, target="sm_90a")
def _remote_no_cluster(X: tp.Tensor[tp.f32, "N", 128]):
    s = tp.shared((128,), tp.f32)
    tp.store(X[0, 0:128], tp.load(s, cta=1))


@tp.kernel(threads=128, target="sm_90a", cluster=(2, 1, 1))
def _remote_rank_out_of_range(X: tp.Tensor[tp.f32, "N", 128]):
    s = tp.shared((128,), tp.f32)
    tp.cluster_sync()
    tp.store(X[0, 0:128], tp.load(s, cta=2))
    tp.cluster_sync()


def test_cluster_k_policy_rows():
    """G14: 1-128 rows (G19: 1-16 too) whose 64-column tiles, split over K in two, fill half a wave to one, with 8-64
    k-tiles: one
    row tile of BM = M rounded up to a wgmma width, K_WAYS=2, CLUSTER_K=2 (launch only: `fixup` and `forms`);
    elsewhere the policies before (16 rows, 129 rows, 14336 columns, 1024 columns, short K: 100 x 2200 x 1000 lost)."""
    for out in (tp.f32, tp.bf16):
        for m, bm, stages in ((1, 8, 8), (8, 8, 8), (9, 16, 8), (16, 16, 8), (17, 24, 8), (24, 24, 8), (25, 32, 4),
                              (32, 32, 4), (33, 48, 4), (48, 48, 4), (64, 64, 4), (65, 80, 4), (80, 80, 4)):
            p = gemm_hopper.policy(m, 4096, 4096, out, fixup=True)
            assert (p["SWAP_AB"], p["K_WAYS"], p["CLUSTER_K"], p["BM"], p["BN"], p["STAGES"], p["SPLIT_K"]) == \
                (1, 2, 2, bm, 64, stages, 1), (m, p)
            kp = gemm_hopper.kernel_params(p)
            assert kp["INSTR"].n == bm and kp["CLUSTER_K"] == 2 and "FIXUP" not in kp
            assert kp["PUSH"] == 1 and kp.get("XCH", 0) == 0, (m, kp)     # (G19: the sums exchanged by st.async)
            assert gemm_hopper.grid_of(m, 4096, p) == (1, 64, 2)
            # the k-tiles it needs (G19's break-evens, the sums pushed up to BM 104): 8 at 1-64 rows, 24 at 65-96
            need = 8 if m <= 64 else 24
            assert gemm_hopper.policy(m, 4096, 64 * need, out, fixup=True)["CLUSTER_K"] == 2
            assert gemm_hopper.policy(m, 4096, 64 * need - 64, out, fixup=True).get("CLUSTER_K", 1) == 1
            assert "CLUSTER_K" not in gemm_hopper.policy(m, 4096, 4096, out, fixup=True, forms=False)
            assert "CLUSTER_K" not in gemm_hopper.policy(m, 4096, 4096, out)
        for m, n, k in ((16, 4096, 448), (20, 4096, 448), (129, 4096, 4096), (128, 14336, 4096),
                        (64, 1024, 4096), (100, 4096, 448), (100, 2200, 1000), (128, 4096, 2560),
                        (1024, 1024, 1024), (81, 4096, 4096), (96, 4096, 4096), (97, 4096, 4096),
                        (112, 4096, 4096), (128, 4096, 4096),
                        (128, 4096, 14336)):   # (G27: 81-128 rows take two unsplit row tiles, B from DRAM)
            assert gemm_hopper.policy(m, n, k, out, fixup=True).get("CLUSTER_K", 1) == 1, (m, n, k)
        for bm in (96, 104, 112, 128):      # (the 81-128-row forms, XCH past BM 104, for callers that ask)
            kp = gemm_hopper.kernel_params(gemm_hopper.cluster_split(bm, 4096, 4096))
            assert kp["CLUSTER_K"] == 2 and kp["PUSH"] == 1 and kp.get("XCH", 0) == (bm > 104)


@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
@pytest.mark.parametrize("m,k,n,bm,params", [
    (112, 700, 200, 112, dict(STAGES=3)),          # n112; 11 k-tiles: 6 per rank, rank 1 reads zeros past K
    (120, 264, 136, 128, dict(STAGES=2)),          # n128, 8 rows past M; 5 k-tiles
    (32, 1100, 70, 32, dict(STAGES=2)),            # 18 k-tiles: each ring turning over 2-3 times
    (130, 330, 64, 64, dict(STAGES=2, M_SHIFT=1)),   # three row tiles, the last shifted back to end at M
])
def test_cluster_k_one_exchange_tile_on_the_interpreter(m, k, n, bm, params, out):
    """XCH=1 (G23): the pushed exchange (PUSH=1) with consumer 1's hand-over and the other rank's sum in ONE tile,
    the other rank signalled by its `flag` push once the tile is read: against float64, NaN-poisoned C."""
    given = {**CK, **params, "BM": bm, "INSTR": getattr(tp.nv, f"wgmma_m64n{bm}k16_bf16"), "PUSH": 1, "XCH": 1}
    c = _launched(m, k, n, given, out, m * 5 + k + n)
    plan = gemm_hopper._PLANS[(m, n, k, c.dtype, out, "sm_90a", *given.items())]
    assert plan.summer is None and plan.params["XCH"] == 1


def test_cluster_k_one_exchange_tile_verifies_clean_and_fits_four_stages():
    """XCH=1 verifies clean in budget (the policy's BM 112 / 128 forms, both outputs, a shifted tile); it allocates
    one (64, BM) f32 exchange tile (plus 64 floats and an mbarrier) where PUSH alone takes two, so 4 stages per ring
    fit in 227 KB at BM 112 / 128; the exchange is two st.async pushes (the row sums, 256 bytes, then the tile), no
    remote load, no release cluster barrier."""
    import time

    import tilepy_verify as tv
    from tilepy_hip.render import render_kernel

    kw = dict(K_WAYS=2, CONSUMERS=2, BN=64, SPLIT_K=1, CLUSTER_K=2, PUSH=1)
    for bm in (112, 128):
        params = {k: v for k, v in gemm_hopper.cluster_split(bm, 4096, 4096).items() if k in gemm_hopper.SWAP_KEYS}
        assert params["XCH"] == 1 and params["STAGES"] == 4
        for kernel in (gemm_splitk_swap, gemm_splitk_swap_bf16):
            t = time.perf_counter()
            report = tv.verify(kernel, target="sm_90a", **params)
            assert report.findings == [], [str(f) for f in report.findings]
            assert time.perf_counter() - t < 30
        p = dict(kw, BM=bm, INSTR=getattr(tp.nv, f"wgmma_m64n{bm}k16_bf16"), STAGES=4)
        src, smem, _ = render_kernel(gemm_splitk_swap.ir("sm_90a", **p, XCH=1))
        assert smem <= 227 * 1024 and render_kernel(gemm_splitk_swap.ir("sm_90a", **dict(p, STAGES=3)))[1] \
            - render_kernel(gemm_splitk_swap.ir("sm_90a", **dict(p, STAGES=3), XCH=1))[1] > 64 * bm * 4 - 512
        with pytest.raises(ResourceError, match="shared memory"):      # two tiles beside 4 stages: too much
            gemm_splitk_swap.ir("sm_90a", **p)
        assert src.count("tp_mbar_arrive_expect_tx_remote(") == 2 and f"{64 * bm * 4}u" in src and "256u" in src
        assert "tp_mapa(" not in src and "tp_cluster_sync()" not in src
    t = time.perf_counter()
    report = tv.verify(gemm_splitk_swap, target="sm_90a", **dict(kw, BM=64, INSTR=tp.nv.wgmma_m64n64k16_bf16,
                                                                  STAGES=4, M_SHIFT=1, XCH=1))
    assert report.findings == [] and time.perf_counter() - t < 30, [str(f) for f in report.findings]


def test_cluster_k_one_exchange_tile_pushed_before_the_xfree_wait_is_reported(tmp_path):
    """Seeded bug in XCH=1: the sum pushed into the other rank's `red` BEFORE the wait on `xfree` (the wait moved after
    the push, so every push still has its wait: the other rank may still be reading consumer 1's hand-over in `red`).
    The verifier reports a race on `red` (checks/cluster._receive_tile_order: the other block's push into a tile this
    block read before it needs a signal computed from the read and waited for before the push). (Dropping the wait
    altogether is reported too: no wait on `xfree` after its push.)"""
    import importlib.util
    import inspect

    import tilepy_verify as tv
    from stdlib_kernels import gemm_splitk_swap as mod0

    src = inspect.getsource(mod0)
    wait = "                        tp.mbarrier_wait(xfree, 0)\n"
    push = "                        tp.store_remote(red, acc, recv_full, tp.cluster_rank() ^ 1)\n"
    assert src.count(wait + push) == 1
    path = tmp_path / "gemm_splitk_swap_seeded.py"
    path.write_text(src.replace(wait + push, push + wait))
    spec = importlib.util.spec_from_file_location("stdlib_kernels._gemm_splitk_swap_seeded", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    params = {k: v for k, v in gemm_hopper.cluster_split(128, 4096, 4096).items() if k in gemm_hopper.SWAP_KEYS}
    assert params["XCH"] == 1
    report = tv.verify(mod.gemm_splitk_swap, target="sm_90a", **params)
    assert any(f.check == "race" and "'red' receives" in f.message for f in report.errors), \
        [str(f) for f in report.findings]


@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
@pytest.mark.parametrize("m,k,n,bm,params", [
    (192, 330, 200, 96, dict(STAGES=2)),            # two n96 row tiles, M = 2 x BM; 6 k-tiles, ring 1's last zeros
    (160, 264, 136, 80, dict(STAGES=3)),            # n80; 5 k-tiles
    (210, 300, 70, 112, dict(STAGES=2)),            # n112, the second tile 14 rows past M (unshifted)
    (200, 200, 130, 128, dict(STAGES=2, M_SHIFT=1)),   # n128, the second tile shifted back to end at M
])
def test_two_unsplit_row_tiles_on_the_interpreter(m, k, n, bm, params, out):
    """G27: 129-256 rows as two row tiles of BM rows (K_WAYS=2, unsplit: each block streams all of K, the second row
    tile's B read again, from the L2 when the pair runs together), wgmma n80 / n96 / n112 unshifted and n128 shifted:
    against float64, NaN-poisoned C."""
    given = {**KW, **params, "FIXUP": 0, "BM": bm, "INSTR": getattr(tp.nv, f"wgmma_m64n{bm}k16_bf16")}
    c = _launched(m, k, n, given, out, m * 7 + k + n)
    plan = gemm_hopper._PLANS[(m, n, k, c.dtype, out, "sm_90a", *given.items())]
    assert plan.summer is None and gemm_hopper.grid_of(m, n, given) == (2, -(-n // 64), 1)


def test_two_unsplit_row_tiles_policy_rows():
    """G27 (rotated input sets: B from DRAM): `launch`'s policy at 81-96 rows is two unsplit 48-row tiles (7 stages,
    unshifted), at 97-128 rows two unsplit 64-row tiles (SWAP_KWAYS, the last shifted), at every K, and at 129-256 rows
    two unsplit row tiles of BM = M / 2 rounded up to n80 / n96 / n112 / n128 (5 / 5 / 4 / 4 stages per ring, shifted
    at BM 128 only), where 2 x N / 64 blocks fill half a wave to one; without the forms, and past N ~ 4200 or below
    ~2100, the policies before; 65-80 rows keep the cluster split (and SWAP_KWAYS at short K)."""
    for out in (tp.f32, tp.bf16):
        for m, k, bm, stages, shift in ((81, 4096, 48, 7, 0), (96, 4096, 48, 7, 0), (96, 448, 48, 7, 0),
                                        (97, 4096, 64, 6, 1), (112, 3100, 64, 6, 1), (128, 4096, 64, 6, 1),
                                        (128, 14336, 64, 6, 1), (128, 448, 64, 6, 1)):
            p = gemm_hopper.policy(m, 4096, k, out, fixup=True)
            assert (p["SWAP_AB"], p["K_WAYS"], p["BM"], p["STAGES"], p["SPLIT_K"], p["M_SHIFT"]) == \
                (1, 2, bm, stages, 1, shift), (m, k, p)
            assert p.get("CLUSTER_K", 1) == 1 and gemm_hopper.grid_of(m, 4096, p) == (2, 64, 1)
        assert gemm_hopper.policy(80, 4096, 4096, out, fixup=True)["CLUSTER_K"] == 2
        assert gemm_hopper.policy(80, 4096, 448, out, fixup=True)["BM"] == 64       # (SWAP_KWAYS, short K)
        for m, bm, stages, shift in ((129, 80, 5, 0), (160, 80, 5, 0), (161, 96, 5, 0), (192, 96, 5, 0),
                                     (200, 112, 4, 0), (224, 112, 4, 0), (225, 128, 4, 1), (256, 128, 4, 1)):
            for n, k in ((4096, 4096), (2200, 1000)):
                p = gemm_hopper.policy(m, n, k, out, fixup=True)
                assert (p["SWAP_AB"], p["K_WAYS"], p["BM"], p["BN"], p["STAGES"], p["SPLIT_K"], p["M_SHIFT"]) == \
                    (1, 2, bm, 64, stages, 1, shift), (m, n, p)
                kp = gemm_hopper.kernel_params(p)
                assert kp["INSTR"].n == bm and "FIXUP" not in kp and kp.get("CLUSTER_K", 1) == 1
                assert gemm_hopper.grid_of(m, n, p) == (2, -(-n // 64), 1)
            assert "SWAP_AB" not in gemm_hopper.policy(m, 4096, 4096, out, fixup=True, forms=False)
            assert "SWAP_AB" not in gemm_hopper.policy(m, 4096, 4096, out)
            for n in (8192, 2048):      # 256 / 64 blocks: not this form
                assert gemm_hopper.policy(m, n, 4096, out, fixup=True).get("K_WAYS", 1) == 1, (m, n)
        assert gemm_hopper.row_tiles2(257, 4096, 4096) is None and gemm_hopper.row_tiles2(80, 4096, 4096) is None


def test_one_row_of_wide_tiles_takes_five_stages_for_bf16_out():
    """G27: 128 x 14336 x 4096 (one row of 112 128 x 128 tiles) bf16 out runs 5 stages (4 before); f32 out, more rows
    of tiles and other widths keep 4."""
    assert gemm_hopper.policy(128, 14336, 4096, tp.bf16, fixup=True)["STAGES"] == 5
    assert gemm_hopper.policy(128, 14336, 4096, tp.bf16)["STAGES"] == 5
    assert gemm_hopper.policy(128, 14336, 4096, tp.f32, fixup=True)["STAGES"] == 4
    assert gemm_hopper.policy(256, 8192, 4096, tp.bf16, fixup=True)["STAGES"] == 4
    assert gemm_hopper.policy(128, 40960, 4096, tp.bf16, fixup=True)["STAGES"] == 4


def test_two_unsplit_row_tiles_verify_clean():
    """G27's policy forms at 129-256 rows (BM 80 / 96 / 112 unshifted, 128 shifted) verify clean (0.3-0.4 CPU s each at
    rest; 30 s a hang guard under load), both outputs."""
    import time

    import tilepy_verify as tv

    for m in (160, 192, 224, 256):
        for out in (tp.f32, tp.bf16):
            p = gemm_hopper.policy(m, 4096, 4096, out, fixup=True)
            kernel, kp = gemm_hopper.plan_kernel(m, 4096, out, p, 4096)
            t = time.perf_counter()
            report = tv.verify(kernel, target="sm_90a", **kp)
            assert report.findings == [], [str(f) for f in report.findings]
            assert time.perf_counter() - t < 30 and kp["K_WAYS"] == 2
