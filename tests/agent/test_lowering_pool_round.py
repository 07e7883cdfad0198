"""Pooling as one kernel (the input read in place, the average's window count fused into the reduction's
store), and half-precision chains rounded where eager rounds (every op's bf16 output), so a fused chain
matches eager's rounding, not only float64's."""

import importlib.util

import pytest
import torch
import torch.nn.functional as F

from argus_agent.lower import dispatch, lower_model, render_program


class _Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def _run(model, inputs, tmp_path, name):
    prog = lower_model(model, inputs)
    src = render_program(prog)
    p = tmp_path / f"{name}.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(f"pool_round_{name}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        return prog, src, mod.argus_forward(model, *inputs)


POOLS = {
    "avg1d_exclude_pad": (lambda x: F.avg_pool1d(x, 5, 2, 2, count_include_pad=False), (2, 3, 41)),
    "avg2d_ceil": (lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), (2, 3, 13, 11)),
    "avg3d": (lambda x: F.avg_pool3d(x, 2, 2, 1), (1, 2, 7, 6, 9)),
    "adaptive_avg2d": (lambda x: F.adaptive_avg_pool2d(x, (5, 3)), (2, 3, 13, 11)),
    "max3d_padded": (lambda x: F.max_pool3d(x, 3, 2, 1), (1, 2, 7, 6, 9)),
    "max2d_dilated_ceil": (lambda x: F.max_pool2d(x, 3, 2, 1, dilation=2, ceil_mode=True), (2, 3, 13, 11)),
}


@pytest.mark.parametrize("case", sorted(POOLS))
def test_pooling_is_one_kernel_matching_float64(case, tmp_path):
    fn, shape = POOLS[case]
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(5))
    prog, src, out = _run(_Fn(fn), [x], tmp_path, case)
    assert len(prog.kernels) == 1, [type(k).__name__ for k in prog.kernels]   # no copy in, no division pass
    assert "pool_in" not in src
    torch.testing.assert_close(out.double(), fn(x.double()), rtol=1e-6, atol=1e-6)


def test_half_precision_chain_rounds_like_eager(tmp_path, monkeypatch):
    """Linear -> GELU -> LayerNorm in bf16: GELU's output is fused into the norm's row kernel, where eager
    rounds it to bf16 before the norm reads it. Rounded the same way, the result is eager's to within one
    bf16 step of the output; computed in fp32 throughout, it is not (LayerNorm amplifies the difference)."""
    g = torch.Generator().manual_seed(11)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(256, 128).to(torch.bfloat16)
            self.norm = torch.nn.LayerNorm(128).to(torch.bfloat16)

        def forward(self, x):
            return self.norm(F.gelu(self.fc(x)))

    torch.manual_seed(3)
    model = M()
    x = torch.randn(48, 256, generator=g).to(torch.bfloat16)
    with torch.no_grad():
        ref = model(x).double()

    def off_by_more_than_one_step(out):
        step = torch.finfo(torch.bfloat16).eps * ref.abs().clamp_min(2.0**-6)
        return int(((out.double() - ref).abs() > 1.01 * step).sum())

    _, _, out = _run(model, [x], tmp_path, "rounded")
    assert off_by_more_than_one_step(out) <= 2
    monkeypatch.setattr(dispatch, "_round_like_eager", lambda t: t)
    _, _, fp32 = _run(model, [x], tmp_path, "fp32")
    assert off_by_more_than_one_step(fp32) > 10 * max(1, off_by_more_than_one_step(out))
