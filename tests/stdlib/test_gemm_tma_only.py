"""G31: TMA_ONLY=1 on gemm_hopper / gemm_splitk / gemm_cluster / gemm_persistent (the operands' bulk copies without
the per-element fallback compiled in beside them, whose registers ptxas sized the whole block for). `policy` gives it
to the forms only `launch` runs (`fixup` and `forms`; not swap-AB or the persistent form, TMA only already), and
`launch` drops it where A's or B's base is not 16-byte aligned. Each form runs on the interpreter against float64,
renders no fallback, and verifies clean."""

from __future__ import annotations

import numpy as np
import pytest
from verify_budget import assert_within_budget, cpu_seconds

import tilepy as tp
from stdlib_kernels import gemm_hopper
from tilepy.dtypes import round_bf16

# (policy shape: the form of its policy, run at a smaller ragged shape on the interpreter)
FORMS = [((512, 512, 512), (130, 70, 200), "gemm_hopper"),          # 64 x 64, f32 out; bf16: the relaxed cluster
         ((768, 768, 768), (70, 130, 300), "gemm_hopper"),          # 64 x 128, 8 stages, TMA store (bf16)
         ((200, 2048, 4096), (70, 130, 520), "gemm_splitk"),        # 64 x 128 split 2, FIXUP=3's slots
         ((2051, 2045, 1000), (130, 261, 200), "gemm_hopper"),      # 128 x 256, B's rows padded
         ((3000, 5000, 4096), (200, 130, 200), "gemm_cluster")]     # 128 x 256 in clusters of 2 (4: f32)


@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
def test_policy_rows(out):
    for shape in ((512, 512, 512), (768, 768, 768), (1024, 1024, 1024), (2051, 2045, 1000), (3000, 5000, 4096),
                  (200, 2048, 4096), (16, 14336, 4096), (2048, 2048, 1024)):
        p = gemm_hopper.policy(*shape, out, fixup=True)
        kernel, kp = gemm_hopper.plan_kernel(shape[0], shape[1], out, p, shape[2])
        assert kernel.name in ("gemm_hopper", "gemm_splitk", "gemm_cluster"), shape
        # bf16 out's 64 x 128 relaxed clusters with the TMA store keep the fallback (measured slower without it)
        kept = out == tp.bf16 and shape == (1024, 1024, 1024)
        assert gemm_hopper._fallback_kept(p) == kept, shape
        assert p.get("TMA_ONLY", 0) == kp.get("TMA_ONLY", 0) == (0 if kept else 1), shape
        # the lowering's policy (it launches gemm_hopper on tensors it does not check) keeps the fallback
        assert "TMA_ONLY" not in gemm_hopper.policy(*shape, out), shape
        assert "TMA_ONLY" not in gemm_hopper.policy(*shape, out, fixup=True, forms=False), shape
    for shape in ((32, 4096, 4096), (128, 4096, 4096), (1024, 1024, 4096), (4096, 4096, 4096)):
        p = gemm_hopper.policy(*shape, out, fixup=True)     # swap-AB / persistent: TMA only already
        assert "TMA_ONLY" not in p and (p.get("SWAP_AB") or p.get("PERSISTENT")), shape


def test_switch_off(monkeypatch):
    monkeypatch.setattr(gemm_hopper, "LAUNCH_TMA_ONLY", False)
    assert "TMA_ONLY" not in gemm_hopper.policy(768, 768, 768, tp.bf16, fixup=True)


@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
@pytest.mark.parametrize("policy_shape,shape,name", FORMS)
def test_forms_on_the_interpreter(policy_shape, shape, name, out):
    m, n, k = shape
    p = gemm_hopper.policy(*policy_shape, out, fixup=True)
    kernel, kp = gemm_hopper.plan_kernel(m, n, out, p, k)
    assert kp["TMA_ONLY"] == 1
    if not (name == "gemm_hopper" and gemm_hopper.clustered(p)):    # (512^3 bf16: the relaxed cluster)
        assert kernel.name == name
    rng = np.random.default_rng(m + n + k)
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    ref = gemm_hopper.reference(a, b)
    c = np.full((m, n), np.nan, np.float32)
    gemm_hopper.launch(a, b, c, out_dtype=out, **p)
    assert not np.isnan(c).any()
    if out == tp.bf16:                  # one bf16 rounding of the f32 sum
        assert np.abs(c - ref).max() <= 2.0**-8 * np.abs(ref).max()
        np.testing.assert_array_equal(c, round_bf16(c))
    else:
        np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4 * np.abs(ref).max())


def test_no_fallback_rendered():
    """TMA_ONLY=1 renders the operands' copies without the `tp_tma_ok` branch and its per-row / per-element copy;
    TMA_ONLY=0 keeps one per operand (an EPILOGUE=0 form: no TMA store's own branch)."""
    import tilepy_hip

    p = gemm_hopper.policy(16, 14336, 4096, tp.f32, fixup=True)
    for tma_only, branches in ((1, 0), (0, 2)):
        k, kp = gemm_hopper.plan_kernel(16, 14336, tp.f32, {**p, "TMA_ONLY": tma_only}, 4096)
        src = tilepy_hip.render(k.ir("sm_90a", **kp), "sm_90a")
        assert src.count("if (tp_tma_ok & ") == branches, tma_only


@pytest.mark.parametrize("out", [tp.f32, tp.bf16])
@pytest.mark.parametrize("policy_shape", [s for s, _, _ in FORMS])
def test_forms_verify_clean(policy_shape, out):
    import tilepy_verify as tv

    p = gemm_hopper.policy(*policy_shape, out, fixup=True)
    kernel, kp = gemm_hopper.plan_kernel(*policy_shape[:2], out, p, policy_shape[2])
    assert kp["TMA_ONLY"] == 1
    def run():
        kernel._cache.clear()
        return cpu_seconds(lambda: tv.verify(kernel, target="sm_90a", **kp))

    took, report = run()
    assert report.findings == [], report.findings
    assert_within_budget(took, lambda: run()[0], str(policy_shape))


class _Recorded:
    """Stands for `_Plan`: records the constexprs launch planned (no kernel runs)."""

    made: list = []

    def __init__(self, M, N, K, out, params):
        self.params = params
        _Recorded.made.append(params)

    def __call__(self, a, b, c, target):
        return None


@pytest.mark.parametrize("which", ["a", "b", "none"])
def test_launch_drops_tma_only_for_an_unaligned_base(monkeypatch, which):
    """A 2-byte-offset view (base off 16 bytes) of A or B: launch plans the policy's form with TMA_ONLY=0 (the
    copies' fallback); aligned operands keep TMA_ONLY=1. (tests/gpu/test_gpu_gemm_tma_only.py runs both.)"""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(gemm_hopper, "_Plan", _Recorded)
    monkeypatch.setattr(gemm_hopper, "_PLANS", {})
    _Recorded.made.clear()
    m, n, k = 768, 768, 768
    a = torch.zeros(m * k + 8, dtype=torch.bfloat16)
    b = torch.zeros(k * n + 8, dtype=torch.bfloat16)
    a = (a[1:m * k + 1] if which == "a" else a[:m * k]).view(m, k)
    b = (b[1:k * n + 1] if which == "b" else b[:k * n]).view(k, n)
    c = torch.empty(m, n, dtype=torch.bfloat16)
    assert gemm_hopper._tma_loadable(a, b) == (which == "none")
    gemm_hopper.launch(a, b, c)
    assert _Recorded.made[-1]["TMA_ONLY"] == (1 if which == "none" else 0)
    assert gemm_hopper.kernel_params(_Recorded.made[-1])["BN"] == 128      # the policy's form otherwise
    gemm_hopper.launch(a, b, c, TMA_ONLY=1)     # a caller's own TMA_ONLY is the caller's
    assert _Recorded.made[-1]["TMA_ONLY"] == 1


@pytest.mark.parametrize("shape", [(512, 512, 512), (1024, 1024, 1024)])
def test_launch_unclusters_for_an_unaligned_b(monkeypatch, shape):
    """gemm_cluster's B multicast is TMA only whatever TMA_ONLY says (a B 2 bytes off 16 was refused on the GPU): launch
    takes the policy without its cluster form there (and TMA_ONLY dropped); aligned, the relaxed cluster (TMA_ONLY at
    512^3's 64 x 64 tiles; 1024^3's 64 x 128 tiles with the TMA store keep the fallback)."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(gemm_hopper, "_Plan", _Recorded)
    monkeypatch.setattr(gemm_hopper, "_PLANS", {})
    m, n, k = shape
    a = torch.zeros(m, k, dtype=torch.bfloat16)
    c = torch.empty(m, n, dtype=torch.bfloat16)
    for off in (0, 1):
        b = torch.zeros(k * n + 8, dtype=torch.bfloat16)[off:off + k * n].view(k, n)
        gemm_hopper.launch(a, b, c)
        got = _Recorded.made[-1]
        assert gemm_hopper.clustered(got) == (off == 0)
        assert got.get("TMA_ONLY", 0) == (1 if off == 0 and shape == (512, 512, 512) else 0)


def test_padded_rows_stay_tma_only():
    """Rows that are not 16-byte multiples are copied into fresh zero-padded buffers, which tensor maps describe:
    an unaligned base there does not drop TMA_ONLY."""
    torch = pytest.importorskip("torch")
    m, n, k = 64, 104, 61           # A's rows 122 bytes (padded); B's 208 bytes (not)
    a = torch.zeros(m * k + 1, dtype=torch.bfloat16)[1:].view(m, k)
    b = torch.zeros(k * n, dtype=torch.bfloat16).view(k, n)
    assert gemm_hopper._tma_loadable(a, b)
    b = torch.zeros(k * n + 1, dtype=torch.bfloat16)[1:].view(k, n)
    assert not gemm_hopper._tma_loadable(a, b)
