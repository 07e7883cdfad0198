"""The MMA operand-layout contract for formats wgmma reads K-major only (e4m3, tf32): an MN-major shared
operand is an error at the mma's line that says how to stage it; the K-major form (B as its (N, K) tile, `.T`)
is clean, and 16-bit formats keep their MN-major B (the transpose bit)."""

import inspect

import tilepy as tp
import tilepy_verify as tv
from stdlib_kernels import gemm_fp8
from tilepy.kernel import kernels_from_source

I8 = tp.nv.wgmma_m64n64k32_e4m3
SW8 = tp.Swizzle(3, 4, 3)   # the 128-byte swizzle on 1-byte elements
SW8_64 = tp.Swizzle(2, 4, 3)


@tp.kernel(threads=128, target="sm_90a")
def fp8_kmajor(A: tp.Tensor[tp.e4m3, "M", "K"], B: tp.Tensor[tp.e4m3, "N", "K"], C: tp.Tensor[tp.f32, "M", "N"]):
    a_s = tp.shared((64, 128), tp.e4m3, swizzle=SW8)
    b_s = tp.shared((64, 128), tp.e4m3, swizzle=SW8)
    tp.copy(A[0:64, 0:128], a_s)
    tp.copy(B[0:64, 0:128], b_s)
    tp.barrier()
    acc = tp.zeros((64, 64), tp.f32, layout=tp.accumulator(I8, (64, 64), (1, 1)))
    acc = tp.mma(a_s, b_s.T, acc)
    tp.store(C[0:64, 0:64], acc)


@tp.kernel(threads=128, target="sm_90a")
def fp8_b_mn_major(A: tp.Tensor[tp.e4m3, "M", "K"], B: tp.Tensor[tp.e4m3, "K", "N"],
                   C: tp.Tensor[tp.f32, "M", "N"]):
    a_s = tp.shared((64, 128), tp.e4m3, swizzle=SW8)
    b_s = tp.shared((128, 64), tp.e4m3, swizzle=SW8_64)       # (K, N) row-major: N contiguous
    tp.copy(A[0:64, 0:128], a_s)
    tp.copy(B[0:128, 0:64], b_s)
    tp.barrier()
    acc = tp.zeros((64, 64), tp.f32, layout=tp.accumulator(I8, (64, 64), (1, 1)))
    acc = tp.mma(a_s, b_s, acc)  # MN-MAJOR B
    tp.store(C[0:64, 0:64], acc)


@tp.kernel(threads=128, target="sm_90a")
def fp8_a_mn_major(A: tp.Tensor[tp.e4m3, "K", "M"], B: tp.Tensor[tp.e4m3, "N", "K"],
                   C: tp.Tensor[tp.f32, "M", "N"]):
    a_s = tp.shared((128, 64), tp.e4m3, swizzle=SW8_64)       # A staged (K, M): M contiguous
    b_s = tp.shared((64, 128), tp.e4m3, swizzle=SW8)
    tp.copy(A[0:128, 0:64], a_s)
    tp.copy(B[0:64, 0:128], b_s)
    tp.barrier()
    acc = tp.zeros((64, 64), tp.f32, layout=tp.accumulator(I8, (64, 64), (1, 1)))
    acc = tp.mma(a_s.T, b_s.T, acc)  # MN-MAJOR A
    tp.store(C[0:64, 0:64], acc)


I32 = tp.nv.wgmma_m64n64k8_tf32


@tp.kernel(threads=128, target="sm_90a")
def tf32_b_mn_major(A: tp.Tensor[tp.f32, "M", "K"], B: tp.Tensor[tp.f32, "K", "N"], C: tp.Tensor[tp.f32, "M", "N"]):
    a_s = tp.shared((64, 32), tp.f32, swizzle=tp.Swizzle(3, 2, 3))
    b_s = tp.shared((32, 64), tp.f32, swizzle=tp.Swizzle(3, 2, 3))
    tp.copy(A[0:64, 0:32], a_s)
    tp.copy(B[0:32, 0:64], b_s)
    tp.barrier()
    acc = tp.zeros((64, 64), tp.f32, layout=tp.accumulator(I32, (64, 64), (1, 1)))
    acc = tp.mma(a_s, b_s, acc)  # MN-MAJOR B
    tp.store(C[0:64, 0:64], acc)


def _line_of(kernel, marker: str) -> int:
    lines, first = inspect.getsourcelines(kernel.fn if hasattr(kernel, "fn") else kernel)
    return first + next(i for i, s in enumerate(lines) if marker in s)


def _errors(kernel):
    return [f for f in tv.verify_ir(kernel.ir("sm_90a")).findings if f.severity == "error"]


def test_k_major_fp8_operands_are_clean():
    assert _errors(fp8_kmajor) == []


def test_mn_major_fp8_b_is_an_error_at_the_mma_line():
    errs = _errors(fp8_b_mn_major)
    assert [f.check for f in errs] == ["mma_layout"], errs
    f = errs[0]
    assert "operand B is MN-major" in f.message and "nv.wgmma_m64n64k32_e4m3" in f.message
    assert "K-major only" in f.message and "b_s[s].T" in f.counterexample["detail"]
    assert f.span.line == _line_of(fp8_b_mn_major, "# MN-MAJOR B")


def test_mn_major_fp8_a_is_an_error_too():
    errs = _errors(fp8_a_mn_major)
    assert [f.check for f in errs] == ["mma_layout"] and "operand A is MN-major" in errs[0].message
    assert errs[0].span.line == _line_of(fp8_a_mn_major, "# MN-MAJOR A")


def test_mn_major_tf32_b_is_an_error():
    errs = _errors(tf32_b_mn_major)
    assert [f.check for f in errs] == ["mma_layout"] and "reads tf32 operands K-major only" in errs[0].message


def test_gemm_fp8_policies_verify_clean():
    for shape in ((4096, 4096, 4096), (1024, 1024, 1024), (128, 4096, 4096)):
        kernel, kp = gemm_fp8.kernel_of(gemm_fp8.policy(*shape))     # 4096^3: gemm_fp8_persistent_tma (G12)
        kernel._cache.clear()
        report = tv.verify_ir(kernel.ir("sm_90a", **kp))
        assert report.findings == [], str(report)
    report = tv.verify_ir(gemm_fp8.gemm_fp8.ir("sm_90a", **gemm_fp8.policy(4096, 4096, 4096, forms=False)))
    assert report.findings == [], str(report)


def test_gemm_fp8_persistent_verifies_clean():
    report = tv.verify_ir(gemm_fp8.gemm_fp8_persistent.ir("sm_90a", **gemm_fp8.PRESETS["sm_90a"]))
    assert report.findings == [], str(report)


def test_gemm_fp8_tag_assertion_catches_a_misaligned_b_tile():
    """The kernel's assertion (A's k equals B's k in every product) has teeth: B copied one k-tile ahead fails."""
    src = open(gemm_fp8.__file__).read()
    good = "tp.copy_bulk(B[n0:n0 + BN, k0:k0 + BK]"
    assert good in src
    bad = src.replace(good, "tp.copy_bulk(B[n0:n0 + BN, k0 + BK:k0 + 2 * BK]")
    k = kernels_from_source(bad, "gemm_fp8_misaligned.py")["gemm_fp8"]
    report = tv.verify_ir(k.ir("sm_90a", **gemm_fp8.policy(1024, 1024, 1024)))
    assert "tag_assertion" in [f.check for f in report.errors], str(report)
    # the persistent kernel's B copy one k-tile ahead
    good = "tp.copy_bulk(B[n0:n0 + BN, k * BK:k * BK + BK]"
    assert good in src
    bad = src.replace(good, "tp.copy_bulk(B[n0:n0 + BN, k * BK + BK:k * BK + 2 * BK]")
    k = kernels_from_source(bad, "gemm_fp8_persistent_misaligned.py")["gemm_fp8_persistent"]
    report = tv.verify_ir(k.ir("sm_90a", **gemm_fp8.PRESETS["sm_90a"]))
    assert "tag_assertion" in [f.check for f in report.errors], str(report)
