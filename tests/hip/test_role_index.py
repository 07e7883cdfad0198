"""The role thread index as the renderer writes it (G37): `tp_tid - lo` hoisted, except in kernels declared with
`@tp.kernel(unsigned_role_index=True)`, where uses outside loops are the unsigned remainder known to lie in
[0, role size) and uses inside loops stay the hoisted difference. Only gemm_splitk_swap opts in: every other kernel
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
