"""Lowerings reworked for speed (issue 12's slow problems), checked on the interpreter against float64:
adaptive average pooling with large windows summed one pooled dim at a time, the outermost first."""

import importlib.util

import pytest
import torch
import torch.nn.functional as F

from argus_agent.lower import lower_model, render_program
from argus_agent.lower.core import Pointwise, Reduction


class _Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def _run(model, inputs, tmp_path, name, target="cpu"):
    prog = lower_model(model, inputs, target)
    src = render_program(prog)
    p = tmp_path / f"{name}.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(f"slow_{name}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        return prog, src, mod.argus_forward(model, *inputs)


ADAPTIVE = {
    # (function, input shape): windows of more than POOL_TAPS taps, uneven (overlapping) in every dim
    "2d_uneven": (lambda x: F.adaptive_avg_pool2d(x, (7, 7)), (2, 3, 47, 45)),
    "2d_rect": (lambda x: F.adaptive_avg_pool2d(x, (3, 5)), (1, 2, 29, 61)),
    "2d_long_rows": (lambda x: F.adaptive_avg_pool2d(x, (2, 3)), (1, 2, 70, 101)),   # > 32 taps in a dim
    "3d": (lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)), (1, 2, 9, 13, 11)),
    "3d_even_dim": (lambda x: F.adaptive_avg_pool3d(x, (3, 5, 4)), (1, 2, 19, 70, 33)),   # 70 / 5: one size
    "2d_bf16": (lambda x: F.adaptive_avg_pool2d(x, (5, 4)), (2, 2, 33, 27)),
}


@pytest.mark.parametrize("case", sorted(ADAPTIVE))
def test_adaptive_avg_pool_outermost_dim_first(case, tmp_path):
    fn, shape = ADAPTIVE[case]
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(7))
    if case.endswith("bf16"):
        x = x.to(torch.bfloat16)
    prog, src, out = _run(_Fn(fn), [x], tmp_path, case)
    ref = fn(x.double())
    if x.dtype == torch.bfloat16:     # one rounding of the f32 mean to bf16
        torch.testing.assert_close(out.double(), ref, rtol=2**-8, atol=2**-8)
        torch.testing.assert_close(out, fn(x), rtol=0, atol=0)
    else:
        torch.testing.assert_close(out.double(), ref, rtol=1e-6, atol=1e-6)
    nsp = len(shape) - 2
    assert len(prog.kernels) == nsp, [type(k).__name__ for k in prog.kernels]
    # the first pass sums along the outermost pooled dim and keeps every later dim whole (its outputs are
    # neighbours along the input's rows: coalesced taps); each pass shrinks one dim to its output size
    first = prog.kernels[0]
    assert tuple(first.out.shape) == shape[:2] + tuple(ref.shape[2:3]) + shape[3:]
    assert all(isinstance(k, (Pointwise, Reduction)) for k in prog.kernels)


def test_adaptive_avg_pool_taps_are_masked_loads(tmp_path):
    """Each tap of a pass is a load masked to its window (nothing outside the window is read, and the sum
    needs no select): a window one element shorter than kmax must not pick up its neighbour's element."""
    x = torch.zeros(1, 1, 40, 40)
    x[0, 0, 20, :] = 1e6            # row 20: inside windows 3 only (7 windows of 40 rows: [17, 23) ends at 23)
    fn = lambda t: F.adaptive_avg_pool2d(t, (7, 7))   # noqa: E731
    prog, src, out = _run(_Fn(fn), [x], tmp_path, "masked")
    torch.testing.assert_close(out.double(), fn(x.double()), rtol=1e-6, atol=1e-6)
    assert "mask=" in src


# ------------------------------------------------------------------------------------------- bf16 Linear
class _LinearGeluNorm(torch.nn.Module):
    def __init__(self, k, n, bias=True):
        super().__init__()
        self.fc = torch.nn.Linear(k, n, bias=bias).to(torch.bfloat16)
        self.norm = torch.nn.LayerNorm(n).to(torch.bfloat16)

    def forward(self, x):
        return self.norm(F.gelu(self.fc(x)))


def _run_recorded(model, inputs, tmp_path, name, precision=None):
    from argus_agent.runtime import launch as real_launch

    prog = lower_model(model, inputs, "sm_90a", precision)
    src = render_program(prog)
    p = tmp_path / f"{name}.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(f"slow_{name}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    calls = []

    def recording(kernel, grid, *args, **constexprs):
        calls.append((kernel.name, args, constexprs))
        return real_launch(kernel, grid, *args, **constexprs)
    mod.launch = recording
    with torch.no_grad():
        out = mod.argus_forward(model, *inputs)
    return prog, mod, calls, out


@pytest.mark.parametrize("M,K,N", [(320, 128, 256), (2048, 264, 2048)], ids=["small", "large"])
def test_bf16_linear_reads_weight_in_place_and_stores_bf16_with_bias(tmp_path, M, K, N, monkeypatch):
    """A bf16 nn.Linear on sm_90a with the opt-in addend form (ARGUS_GEMM_ADDEND_INIT=1): gemm_hopper reads the
    (N, K) weight in place (B_NK=1, no transposing copy), adds the bias to the f32 accumulator and stores bf16
    once (eager's addmm: bias in fp32, one rounding), so the GELU + LayerNorm kernel after it reads bf16.
    Result: eager's to within one bf16 step."""
    from argus_agent.lower import templates
    from stdlib_kernels import gemm_hopper

    monkeypatch.setattr(templates, "GEMM_ADDEND_INIT", True)
    torch.manual_seed(M + K)
    model = _LinearGeluNorm(K, N)
    x = torch.randn(M, K, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    prog, mod, calls, out = _run_recorded(model, [x], tmp_path, f"linear_{M}")
    names = [c[0] for c in calls]
    assert len(calls) == 2, names                      # the GEMM (bias fused) and the row kernel: no copies
    _every_kernel_fits_at_its_defaults(mod)
    gname, gargs, gkw = calls[0]
    assert gname.startswith("gemm_hopper") and gkw["B_NK"] == 1
    assert gargs[1].shape == (N, K) and gargs[1].data_ptr() == model.fc.weight.data_ptr()   # in place
    assert gargs[2].dtype == torch.bfloat16            # the GEMM's output is bf16
    want = gemm_hopper.kernel_params(gemm_hopper.policy(M, N, K, __import__("tilepy").bf16))
    assert {k: gkw[k] for k in want} == want           # at the bf16-output policy
    # the GEMM's output is eager's addmm output, bit for bit up to one bf16 step of accumulation order
    lin = gargs[2].float()
    with torch.no_grad():
        ref_lin = F.linear(x.double(), model.fc.weight.double(), model.fc.bias.double())
    step = torch.finfo(torch.bfloat16).eps * ref_lin.abs().clamp_min(2.0**-6)
    assert bool(((lin.double() - ref_lin.bfloat16().double()).abs() <= 1.01 * step).all())
    with torch.no_grad():
        ref = model(x).double()
    step = torch.finfo(torch.bfloat16).eps * ref.abs().clamp_min(2.0**-6)
    bad = ((out.double() - ref).abs() > 2.01 * step).float().mean().item()
    assert bad < 1e-3, bad
    # and no further from the float64 program than eager is (bf16 rounding of a LayerNorm input near a
    # rounding boundary moves single outputs by a few steps, in eager as in ours)
    m64 = _LinearGeluNorm(K, N).double()
    m64.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    with torch.no_grad():
        exact = m64(x.double())
    ours, eager = (out.double() - exact).abs(), (ref - exact).abs()
    assert ours.max() <= 1.5 * eager.max() and ours.mean() <= 1.1 * eager.mean(), (ours.max(), eager.max())


def _every_kernel_fits_at_its_defaults(mod):
    """The agent's build gate translates every kernel of the candidate at its defaults: the module's own
    gemm_hopper (f32 out) must not carry a bf16-output launch's stages and staged tile (278528 bytes of
    shared memory at 128 x 256, over sm_90a's 232448: level1/088 and level2/054 failed on the H100 so)."""
    import tilepy

    for name, k in vars(mod).items():
        if isinstance(k, tilepy.Kernel) and k.fn.__module__ == mod.__name__:
            k.ir("sm_90a")


def test_bf16_mm_output_is_stored_by_the_gemm(tmp_path):
    """a @ b in bf16 at the large policy (128 x 256 tiles): one kernel, the GEMM storing the bf16 output
    itself; every kernel of the candidate translates at its defaults."""
    a = torch.randn(2048, 264, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16)
    b = torch.randn(264, 2048, generator=torch.Generator().manual_seed(6)).to(torch.bfloat16)
    prog, mod, calls, out = _run_recorded(_Fn(lambda x, y: x @ y), [a, b], tmp_path, "mm_large")
    assert [c[0] for c in calls] == ["gemm_hopper_e0"], calls
    assert calls[0][1][2] is out or calls[0][1][2].data_ptr() == out.data_ptr()
    _every_kernel_fits_at_its_defaults(mod)
    ref = a.double() @ b.double()
    step = torch.finfo(torch.bfloat16).eps * ref.abs().clamp_min(2.0**-6)
    assert bool(((out.double() - ref.bfloat16().double()).abs() <= 1.01 * step).all())


def test_bf16_linear_on_a_non_transposed_b_keeps_its_layout(tmp_path):
    """x @ w with w a (K, N) bf16 tensor: B read as (K, N), as before (no B_NK), result rounded to bf16."""
    w = torch.randn(128, 256, generator=torch.Generator().manual_seed(2)).to(torch.bfloat16)
    x = torch.randn(320, 128, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)
    prog, mod, calls, out = _run_recorded(_Fn(lambda a, b: a @ b), [x, w], tmp_path, "mm_kn")
    gemm = [c for c in calls if c[0].startswith("gemm_hopper")]
    assert len(gemm) == 1 and gemm[0][2].get("B_NK", 0) == 0 and gemm[0][1][1].shape == (128, 256)
    assert out.dtype == torch.bfloat16
    ref = x.double() @ w.double()
    step = torch.finfo(torch.bfloat16).eps * ref.abs().clamp_min(2.0**-6)
    assert bool(((out.double() - ref.bfloat16().double()).abs() <= 1.01 * step).all())


def test_by_default_a_bias_epilogue_stays_after_the_gemm(tmp_path):
    """Default (GEMM_ADDEND_INIT off): the weight is still read in place (no copy), the GEMM stores its f32
    product, and the bias with eager's rounding of the Linear's output, then GELU and LayerNorm, run after it."""
    torch.manual_seed(5)
    model = _LinearGeluNorm(264, 2048)
    x = torch.randn(2048, 264, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    prog, mod, calls, out = _run_recorded(model, [x], tmp_path, "linear_default")
    gname, gargs, gkw = calls[0]
    names = [c[0] for c in calls]
    assert gname.startswith("gemm_hopper_nk") and len(calls) == 3, names   # GEMM, bias + rounding, rows
    assert gkw["B_NK"] == 1 and gargs[1].data_ptr() == model.fc.weight.data_ptr()
    assert gargs[2].dtype == torch.float32
    _every_kernel_fits_at_its_defaults(mod)
    with torch.no_grad():
        ref = model(x).double()
    step = torch.finfo(torch.bfloat16).eps * ref.abs().clamp_min(2.0**-6)
    assert ((out.double() - ref).abs() > 2.01 * step).float().mean().item() < 1e-3


def test_gemm_epilogue_with_a_second_tensor_stays_out_of_the_gemm(tmp_path, monkeypatch):
    """An fp32 Linear times an (M, N) tensor under --precision bf16 (gemm_hopper, f32 out): the bias alone could
    be the accumulator's initial value, but the second loaded tile beside a 128 x 256 accumulator would spill
    (the build gate refuses spills), so the product stays a kernel after the GEMM. A bias-only epilogue fuses
    (with the opt-in addend form, ARGUS_GEMM_ADDEND_INIT=1)."""
    from argus_agent.lower import templates

    monkeypatch.setattr(templates, "GEMM_ADDEND_INIT", True)
    torch.manual_seed(1)
    lin = torch.nn.Linear(264, 2048)
    x = torch.randn(2048, 264, generator=torch.Generator().manual_seed(2))
    s = torch.randn(2048, 2048, generator=torch.Generator().manual_seed(3))
    for fn, fused in ((lambda a, b: lin(a) * b, False), (lambda a, b: torch.relu(lin(a)), True)):
        model = _Fn(fn)
        model.lin = lin
        prog, mod, calls, out = _run_recorded(model, [x, s], tmp_path, f"lin_{fused}", precision="bf16")
        gemm = [c for c in calls if c[0].startswith("gemm_hopper")]
        assert len(gemm) == 1 and gemm[0][0].startswith("gemm_hopper_e") == fused, calls
        after = calls[calls.index(gemm[0]) + 1:]            # (the operands' bf16 copies come before it)
        assert len(after) == (0 if fused else 1), calls
        _every_kernel_fits_at_its_defaults(mod)
        xb, wb = x.bfloat16().double(), lin.weight.bfloat16().double()    # the bf16 operands, f32 accumulation
        lin64 = xb @ wb.T + lin.bias.double()
        ref = torch.relu(lin64) if fused else lin64 * s.double()
        torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=1e-4)
