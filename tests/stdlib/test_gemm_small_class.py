"""G16's small-class rows of gemm_hopper's policy (issue 15; measured in benchmarks/results/gemm-g16-*.json):
* the small class whose 64 x 128 tiles fill at most half a wave with at most 16 k-tiles runs 64 x 64 tiles, 8
  stages, unsplit (SMALL_64x64) instead of 64 x 128 tiles split 2 with atomics;
* large shapes whose 128 x 256 tiles would split K and whose 64 x 128 tiles fill 3/4 to one wave run the small
  class's tiles unsplit;
* the small class's bf16 output goes out through the TMA store (EPILOGUE=2), with 8 stages (G22), and in relaxed 2x1
  clusters where f32 out takes them (64 x 128 tiles, >= 16 k-tiles; G29).
The policy table is checked by shape; each form runs on the interpreter through `launch` against float64 on ragged
shapes (its constexprs taken from the shape it serves, run on a smaller one: the interpreter is slow), and verifies
clean (its time: benchmarks/NOTES.md, G16)."""

from __future__ import annotations

import pytest
from bf16_gemm_checks import check_launch_twice  # (tests/stdlib is on sys.path: pytest prepends it)

import tilepy as tp
from stdlib_kernels import gemm_hopper


def _small(p):
    return {k: p.get(k) for k in ("BM", "BN", "STAGES", "CONSUMERS", "SPLIT_K", "EPILOGUE", "PERSISTENT",
                                  "CLUSTER_M")}


# launch's forms (fixup and forms): gemm_cluster RELAXED=1 (G22) for bf16 out on 64 x 64 tiles and f32 out on 64 x 128
# tiles with >= 16 k-tiles, bf16 out on those too through the TMA store (G29); the lowering (fixup=False, or
# forms=False) keeps gemm_hopper there
CL64_BF16 = dict(BM=64, BN=64, STAGES=8, CONSUMERS=1, SPLIT_K=None, EPILOGUE=2, PERSISTENT=None, CLUSTER_M=2)
CL128_F32 = dict(BM=64, BN=128, STAGES=8, CONSUMERS=1, SPLIT_K=None, EPILOGUE=0, PERSISTENT=None, CLUSTER_M=2)
CL128_BF16 = dict(CL128_F32, EPILOGUE=2)
KWAYS = dict(SWAP_AB=1, K_WAYS=2, CONSUMERS=2, BM=128, BN=64, STAGES=4, SPLIT_K=1, IN_FLIGHT=1, CLUSTER_M=None)


@pytest.mark.parametrize("fixup", [False, True])     # the lowering's policy and launch's
def test_policy_rows(fixup):
    for shape in ((512, 512, 512), (300, 500, 400), (640, 640, 1000)):
        for out in (tp.f32, tp.bf16):
            p = gemm_hopper.policy(*shape, out, fixup=fixup)
            assert gemm_hopper.shape_class(*shape) == "small"
            if fixup and out == tp.bf16:
                assert _small(p) == CL64_BF16 and p["RELAXED"] == 1 and p["IN_FLIGHT"] == 0, (shape, p)
                assert _small(gemm_hopper.policy(*shape, out, fixup=True, forms=False))["CLUSTER_M"] is None
                continue
            assert _small(p) == dict(BM=64, BN=64, STAGES=8, CONSUMERS=1, SPLIT_K=None, EPILOGUE=0,
                                     PERSISTENT=None, CLUSTER_M=None), (shape, p)
    # more than 16 k-tiles: the split stays (not measured without it)
    assert gemm_hopper.policy(512, 512, 4096, fixup=fixup)["SPLIT_K"] == 4
    # more than half a wave of 64 x 128 tiles: those tiles, the TMA store for bf16 out
    for shape in ((768, 768, 768), (1024, 1024, 1024)):
        p = gemm_hopper.policy(*shape, tp.bf16, fixup=fixup)
        if fixup and shape[2] >= 1024:          # 16 k-tiles: the cluster form (768^3, 12: not)
            assert _small(p) == CL128_BF16 and p["RELAXED"] == 1 and p["IN_FLIGHT"] == 0, (shape, p)
            p = gemm_hopper.policy(*shape, tp.bf16, fixup=True, forms=False)
        assert _small(p) == dict(BM=64, BN=128, STAGES=8, CONSUMERS=1, SPLIT_K=None, EPILOGUE=2, PERSISTENT=None,
                                 CLUSTER_M=None), (shape, p)
        p = gemm_hopper.policy(*shape, tp.f32, fixup=fixup)
        if fixup and shape[2] >= 1024:          # 16 k-tiles: the cluster form (768^3, 12: not)
            assert _small(p) == CL128_F32 and p["RELAXED"] == 1, (shape, p)
        else:
            assert _small(p) == dict(BM=64, BN=128, STAGES=4, CONSUMERS=1, SPLIT_K=None, EPILOGUE=None,
                                     PERSISTENT=None, CLUSTER_M=None)
    # the large class with few 128 x 256 tiles and a wave of 64 x 128 ones: those, unsplit; launch's forms: >= 32
    # k-tiles cuBLAS's 128 x 64 tile as two consumers on alternate k-tiles (K_WAYS=2 swap-AB, G29 G37), else the cluster
    # (not where B's rows are off 128-byte lines, 1000 x 1000, nor with more row tiles than column tiles, 2048 x 512)
    for shape in ((1024, 1024, 4096), (1000, 1000, 4000), (512, 2048, 4096), (1000, 1000, 4096), (2048, 512, 4096),
                  (1000, 1024, 4096), (1024, 1024, 2048), (1024, 1024, 4032),    # (32 / 63 k-tiles)
                  (1024, 1024, 1984),                                            # (31: under the bound)
                  (1000, 1024, 3000), (1024, 1024, 4000)):     # (A's rows off 128-byte lines: the cluster, G33)
        assert gemm_hopper.shape_class(*shape) == "large"
        kways = (-(-shape[2] // 64) >= gemm_hopper.SMALL_KWAYS_MIN_K_TILES and shape[1] % 64 == 0
                 and shape[2] % 64 == 0 and -(-shape[0] // 128) <= shape[1] // 64)
        for out, cl in ((tp.bf16, CL128_BF16), (tp.f32, CL128_F32)):
            p = gemm_hopper.policy(*shape, out, fixup=fixup)
            if fixup and kways:
                assert {k: p.get(k) for k in KWAYS} == KWAYS and "PRODUCER_REGS" not in p, (shape, p)
                assert gemm_hopper.plan_kernel(*shape[:2], out, p, shape[2])[0].name == "gemm_splitk_swap"
            elif fixup:
                assert _small(p) == cl and p["RELAXED"] == 1 and "PRODUCER_REGS" not in p, (shape, p)
        p = gemm_hopper.policy(*shape, tp.bf16, fixup=True, forms=False)
        assert _small(p) == dict(BM=64, BN=128, STAGES=8, CONSUMERS=1, SPLIT_K=None, EPILOGUE=2, PERSISTENT=None,
                                 CLUSTER_M=None), (shape, p)
        p = gemm_hopper.policy(*shape, tp.f32, fixup=fixup, forms=False)
        assert _small(p) == dict(BM=64, BN=128, STAGES=4, CONSUMERS=1, SPLIT_K=None, EPILOGUE=None, PERSISTENT=None,
                                 CLUSTER_M=None)
        assert "PRODUCER_REGS" not in p and p["IN_FLIGHT"] == 1
    # the mid-size rule (128 x 128 tiles) and the large class proper are not this rule's
    assert gemm_hopper.policy(2048, 1024, 1024)["BM"] == 128 and gemm_hopper.policy(2048, 2048, 2048)["BN"] == 256


# (the shape whose policy the form is, the shape it runs at here)
# (launch's policy: gemm_cluster RELAXED=1 for bf16 out of the first two and both outputs of the last two;
# gemm_splitk_swap K_WAYS=2 for both outputs of the third and fourth, G29)
FORMS = [((512, 512, 512), (130, 200, 300)),       # SMALL_64x64: ragged M / N / K
         ((300, 500, 400), (70, 72, 1000)),        # SMALL_64x64: 16 k-tiles (K not a multiple of BK)
         ((1024, 1024, 4096), (130, 264, 200)),    # the large class on the small tiles, 64 k-tiles: K_WAYS 128 x 64
         ((1024, 1024, 4096), (200, 130, 300)),    # the same, 5 k-tiles (consumer 0 takes one more)
         ((1000, 1000, 4000), (130, 264, 200)),    # 63 k-tiles: 64 x 128 in relaxed clusters, TMA store (bf16)
         ((1024, 1024, 1024), (100, 130, 70))]     # the small class's own: N one column past a tile


@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
@pytest.mark.parametrize("policy_shape,shape", FORMS)
def test_forms_on_the_interpreter(policy_shape, shape, out):
    m, n, k = shape
    check_launch_twice(m, n, k, out, gemm_hopper.policy(*policy_shape, out, fixup=True))


@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
@pytest.mark.parametrize("policy_shape", [(512, 512, 512), (1024, 1024, 4096), (1000, 1000, 4000), (1024, 1024, 1024)])
def test_forms_verify_clean(policy_shape, out):
    import tilepy_verify as tv

    p = gemm_hopper.policy(*policy_shape, out, fixup=True)
    kernel, kp = gemm_hopper.plan_kernel(*policy_shape[:2], out, p, policy_shape[2])
    report = tv.verify(kernel, target="sm_90a", **kp)
    assert report.findings == [], report.findings


# G22: gemm_cluster RELAXED=1 (the opening cluster barrier relaxed, the closing one replaced by the producer's tail:
# it waits until every block's consumers released every stage it filled), 2x1 clusters along M with B multicast
_CL = dict(BM=64, BN=128, CONSUMERS=1, INSTR=tp.nv.wgmma_m64n128k16_bf16, IN_FLIGHT=0, CLUSTER_M=2, RELAXED=1,
           STAGES=8)
RELAXED_FORMS = [_CL, dict(_CL, BN=64, INSTR=tp.nv.wgmma_m64n64k16_bf16), dict(_CL, BM=128, CONSUMERS=2, STAGES=6),
                 dict(_CL, BM=128, BN=64, CONSUMERS=2, INSTR=tp.nv.wgmma_m64n64k16_bf16),
                 dict(_CL, CLUSTER_M=4)]     # G29: clusters of 4 row tiles, B multicast to 4


@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
@pytest.mark.parametrize("form", range(len(RELAXED_FORMS)))
@pytest.mark.parametrize("shape", [(130, 200, 300), (200, 130, 64), (70, 72, 1000)])
def test_relaxed_cluster_on_the_interpreter(shape, form, out):
    m, n, k = shape
    p = dict(RELAXED_FORMS[form], EPILOGUE=2 if out == tp.bf16 else 0)
    kernel, kp = gemm_hopper.plan_kernel(m, n, out, p, k)
    assert kernel.name == "gemm_cluster" and kp["RELAXED"] == 1
    check_launch_twice(m, n, k, out, p)


def test_relaxed_cluster_source():
    """RELAXED=1 renders no release / acquire cluster barrier (its MEMBAR.ALL.GPU was the form's cost per launch) and
    the producer's tail waits; RELAXED=0 keeps both barriers."""
    import tilepy_hip

    for rel in (0, 1):
        k, kp = gemm_hopper.plan_kernel(1024, 1024, tp.bf16, dict(_CL, EPILOGUE=2, RELAXED=rel), 1024)
        src = tilepy_hip.render(k.ir("sm_90a", **kp), "sm_90a")
        assert src.count("tp_cluster_sync();") == (0 if rel else 2)
        assert src.count("tp_cluster_sync_relaxed();") == rel


@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
@pytest.mark.parametrize("form", range(len(RELAXED_FORMS)))
def test_relaxed_cluster_verifies_clean(form, out):
    """Every check clean, the cluster rules included: the relaxed opening barrier publishes the inits, the producer's
    tail (every remote release waited for) closes the kernel (tilepy_verify/checks/cluster.py, V13)."""
    import tilepy_verify as tv

    p = dict(RELAXED_FORMS[form], EPILOGUE=2 if out == tp.bf16 else 0)
    kernel, kp = gemm_hopper.plan_kernel(1024, 1024, out, p, 1024)
    report = tv.verify(kernel, target="sm_90a", **kp)
    assert report.findings == [], report.findings
    # (seeded bugs of the tail, e.g. a stage it does not wait for: tests/verify/test_cluster_tail.py)
