"""The role thread index as the renderer writes it (G37): `tp_tid - lo` hoisted, except in kernels declared with
`@tp.kernel(unsigned_role_index=True)`, where uses outside loops are the unsigned remainder known to lie in
[0, role size) and uses inside loops stay the hoisted difference. gemm_splitk_swap opts in, and gemm_fp8_swap in its
one-consumer forms (H2; the option may be a function of the constexprs): every other kernel
renders as before (the unsigned form moved ptxas into spills in kernels near their register cap)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp32, gemm_hopper  # noqa: E402

UNSIGNED = "((int)((unsigned)(tp_tid - 128) % 128u))"


def _render(M, N, K, out, p):
    kernel, kp = gemm_hopper.plan_kernel(M, N, out, p, K)
    return kernel, kp, tilepy_hip.render(kernel.ir("sm_90a", **kp), "sm_90a")


def test_k_ways_writes_the_unsigned_index_outside_loops_and_the_hoisted_one_inside():
    for out in (tp.bf16, tp.f32):
        p = gemm_hopper.policy(1024, 1024, 4096, out, fixup=True)
        kernel, _, src = _render(1024, 1024, 4096, out, p)
        assert kernel.name == "gemm_splitk_swap" and kernel.unsigned_role_index
        assert UNSIGNED in src and "((int)((unsigned)(tp_tid - 256) % 128u))" in src
        # (the wgmma operands' warpgroup, inside the k loop: the plain difference, hoisted once)
        assert "const int tp_rt" in src and "= tp_tid - 128;" in src


def test_the_option_off_renders_the_plain_index():
    p = gemm_hopper.policy(1024, 1024, 4096, tp.bf16, fixup=True)
    kernel, kp = gemm_hopper.plan_kernel(1024, 1024, tp.bf16, p, 4096)
    plain = kernel.retyped()
    plain.unsigned_role_index = False
    src = tilepy_hip.render(plain.ir("sm_90a", **kp), "sm_90a")
    assert "(unsigned)(tp_tid" not in src and "= tp_tid - 128;" in src
    assert src != tilepy_hip.render(kernel.ir("sm_90a", **kp), "sm_90a")


def test_other_kernels_keep_the_signed_index():
    for M, N, K, out in ((4096, 4096, 4096, tp.bf16), (4096, 4096, 4096, tp.f32), (1024, 1024, 1024, tp.bf16),
                         (512, 512, 512, tp.bf16)):
        for fixup in (True, False):
            kernel, _, src = _render(M, N, K, out, gemm_hopper.policy(M, N, K, out, fixup=fixup))
            assert not kernel.unsigned_role_index
            assert "(unsigned)(tp_tid" not in src and "tp_tid - 128" in src, (M, N, K, out, fixup, kernel.name)
    kp = {**gemm_fp32.PRESETS["sm_90a"], **gemm_fp32.RAW}
    src = tilepy_hip.render(gemm_fp32.gemm_fp32.ir("sm_90a", **kp), "sm_90a")
    assert "(unsigned)(tp_tid" not in src and "tp_tid - 128" in src


def test_the_option_is_the_kernels_own():
    @tp.kernel(threads=256, unsigned_role_index=True)
    def k(X: tp.Tensor[tp.f32, "N"]):
        pass

    assert k.unsigned_role_index and k.ir("sm_90a").unsigned_role_index
    assert not gemm_hopper.gemm_hopper.unsigned_role_index and not gemm_hopper.gemm_hopper.ir(
        "sm_90a", **gemm_hopper.PRESETS["sm_90a"]).unsigned_role_index


def test_the_option_may_be_chosen_per_specialization():
    @tp.kernel(threads=256, unsigned_role_index=lambda c: c["WIDE"] == 1)
    def k(X: tp.Tensor[tp.f32, "N"], WIDE: tp.constexpr = 0):
        pass

    assert k.ir("sm_90a", WIDE=1).unsigned_role_index and not k.ir("sm_90a").unsigned_role_index


def _fp8_render(M, N, K):
    from stdlib_kernels import gemm_fp8

    kernel, kp = gemm_fp8.kernel_of(gemm_fp8.policy(M, N, K))
    assert kernel.name == "gemm_fp8_swap"
    return kp, tilepy_hip.render(kernel.ir("sm_90a", **kp), "sm_90a")


def test_fp8_swap_takes_the_unsigned_index_in_its_one_consumer_forms_only():
    """H2 (benchmarks/NOTES.md): the one-consumer forms without the halves' exchange (unsplit BM 16, two row tiles of
    BM 48 / 96, STORE_T, the cluster's split at BM 16) write the unsigned index; HALF_SUM and two consumers do not."""
    for M, N, K in ((16, 4096, 4096), (96, 4096, 4096), (192, 4096, 4096), (256, 4096, 4096), (16, 4096, 14336)):
        kp, src = _fp8_render(M, N, K)
        assert kp["CONSUMERS"] == 1 and not kp["HALF_SUM"], (M, N, K, kp)
        assert "(unsigned)(tp_tid - 128)" in src, (M, N, K)
    for M, N, K in ((64, 4096, 4096), (128, 4096, 4096), (32, 4096, 14336), (128, 14336, 4096), (192, 4096, 14336)):
        kp, src = _fp8_render(M, N, K)
        assert kp["HALF_SUM"] or kp["CONSUMERS"] == 2 or kp["SPLIT_K"] > 1, (M, N, K, kp)
        assert "(unsigned)(tp_tid" not in src and "tp_tid - 128" in src, (M, N, K)
