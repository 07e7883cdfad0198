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
