"""G33: gemm_splitk_swap K_WAYS=2 in thread-block clusters: CLUSTER_N (1 x CLUSTER_N clusters of adjacent column tiles
sharing A's tile by multicast, cuBLAS's nvjet 128x64_64x8_1x2) and CLUSTER_M (row tiles sharing B's), with RELAXED=1 (a
relaxed opening cluster barrier; the producer's tail, waiting for every release made into its block, in place of the
closing barrier) or the full barriers. On the interpreter against float64 at ragged shapes (an odd column-tile count:
the grid rounded up to whole clusters, a block wholly past N; one k-tile; an odd k-tile count), clean under
tilepy-verify, rendered without the non-relaxed barriers, and launch's checks of the constexprs."""

import pytest
from bf16_gemm_checks import check_launch_twice  # (tests/stdlib is on sys.path: pytest prepends it)

import tilepy as tp
from stdlib_kernels import gemm_hopper

KW = dict(SWAP_AB=1, K_WAYS=2, CONSUMERS=2, IN_FLIGHT=1, SPLIT_K=1, STAGES=4, BM=128, BN=64,
          INSTR=tp.nv.wgmma_m64n128k16_bf16)
FORMS = {"cn2_rel": dict(KW, CLUSTER_N=2, RELAXED=1), "cn2": dict(KW, CLUSTER_N=2),
         "cn2_rel_w0": dict(KW, CLUSTER_N=2, RELAXED=1, IN_FLIGHT=0), "cn4_rel": dict(KW, CLUSTER_N=4, RELAXED=1),
         "cm2_rel": dict(KW, CLUSTER_M=2, RELAXED=1), "cn2_rel_s2": dict(KW, CLUSTER_N=2, RELAXED=1, STAGES=2)}


@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("shape", [(130, 200, 300), (200, 130, 64), (130, 330, 700), (70, 72, 1000)])
def test_kways_cluster_on_the_interpreter(shape, form, out):
    m, n, k = shape
    p = FORMS[form]
    kernel, kp = gemm_hopper.plan_kernel(m, n, out, p, k)
    assert kernel.name == "gemm_splitk_swap" and kp.get("CLUSTER_N", 1) == p.get("CLUSTER_N", 1)
    check_launch_twice(m, n, k, out, p)


@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
@pytest.mark.parametrize("form", list(FORMS))
def test_kways_cluster_verifies_clean(form, out):
    """Every check clean, the cluster rules included: the relaxed opening barrier publishes the inits, and the tail
    (the releases pairs .. pairs + STAGES - IN_FLIGHT - 1 of each ring, every one made into the block) closes it."""
    import tilepy_verify as tv

    kernel, kp = gemm_hopper.plan_kernel(1024, 1024, out, FORMS[form], 4096)
    report = tv.verify(kernel, target="sm_90a", **kp)
    assert report.findings == [], report.findings


def test_kways_cluster_source():
    """RELAXED=1 renders the opening cluster barrier relaxed and no closing one; without it both are release /
    acquire barriers. A's copies are multicast with CLUSTER_N, B's with CLUSTER_M."""
    import tilepy_hip

    for form, (strict, relaxed) in (("cn2_rel", (0, 1)), ("cn2", (2, 0)), ("cm2_rel", (0, 1))):
        k, kp = gemm_hopper.plan_kernel(1024, 1024, tp.bf16, FORMS[form], 1024)
        src = tilepy_hip.render(k.ir("sm_90a", **kp), "sm_90a")
        assert src.count("tp_cluster_sync();") == strict and src.count("tp_cluster_sync_relaxed();") == relaxed, form
        assert src.count("_mc(") == 2, form         # one multicast copy per ring


@pytest.mark.parametrize("bad", [dict(CLUSTER_N=2, K_WAYS=1, CONSUMERS=2, BN=128),
                                 dict(CLUSTER_N=2, CLUSTER_M=2), dict(CLUSTER_N=3), dict(RELAXED=1),
                                 dict(CLUSTER_N=2, CLUSTER_K=2)])
def test_kways_cluster_constexprs_checked(bad):
    with pytest.raises(ValueError, match="CLUSTER_N|RELAXED|CLUSTER_K"):
        gemm_hopper.kernel_params(dict(KW, **bad))
