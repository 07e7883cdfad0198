"""A lowered fp32 Linear on a real GPU splits its weight into TF32 halves once (argus_agent.runtime.weight_split)
and again after an in-place change of the weight: outputs against float64 before and after the change, and the
number of split launches. 300 x 2048 -> 2048 (3 row tiles, 64 k-tiles): the GEMM also runs the split-K policy. Skips
without a GPU."""

from __future__ import annotations

import importlib.util

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

from argus_agent import runtime  # noqa: E402
from argus_agent.lower import lower_model, render_program  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")


def _rel(x, ref):
    return float((x.double() - ref).norm() / ref.norm())


def test_lowered_linear_splits_its_weight_once_per_state(tmp_path, monkeypatch):
    torch.manual_seed(17)
    lin, x = torch.nn.Linear(2048, 2048), torch.randn(300, 2048)     # (at most 256 rows: swap-AB, no split)
    src = render_program(lower_model(lin, [x], "sm_90a"))
    assert "weight_split(split_tf32" in src and "KSPLIT=" in src
    seen = []
    real = runtime.launch

    def counting(kernel, grid, *args, **kw):
        if kernel.name.startswith("split_tf32"):
            seen.append(kernel.name)
        return real(kernel, grid, *args, **kw)
    monkeypatch.setattr(runtime, "launch", counting)
    p = tmp_path / "lin.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location("gpu_lowered_weight_split", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    lin, xd = lin.to(DEV), x.to(DEV)
    torch.backends.cuda.matmul.allow_tf32 = False
    with torch.no_grad():
        outs = [mod.argus_forward(lin, xd) for _ in range(3)]
        torch.cuda.synchronize()
        assert len(seen) == 1 and all(torch.equal(o, outs[0]) for o in outs)
        ref = torch.nn.functional.linear(xd.double(), lin.weight.double(), lin.bias.double())
        assert _rel(outs[0], ref) <= _rel(lin(xd), ref)
        lin.weight.mul_(-0.5)
        out = mod.argus_forward(lin, xd)
        torch.cuda.synchronize()
        assert len(seen) == 2
        ref = torch.nn.functional.linear(xd.double(), lin.weight.double(), lin.bias.double())
        assert _rel(out, ref) <= _rel(lin(xd), ref)


@pytest.mark.parametrize("tf32", [False, True])
def test_lowered_conv_tma_reorders_and_splits_its_weight_once_per_state(tmp_path, monkeypatch, tf32):
    """conv_tma's B (the weight reordered into taps x padded channels by a pointwise kernel, then split) is made on
    the first call and after an in-place change only (weight_split's prep); outputs against float64 next to eager
    cuDNN (3xTF32) or TF32's own error (one pass)."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", tf32)
    torch.manual_seed(18)
    conv, x = torch.nn.Conv2d(48, 64, 3, padding=1), torch.randn(2, 48, 20, 18)
    src = render_program(lower_model(conv, [x], "sm_90a"))
    assert "prep=lambda: launch(k0_pointwise," in src and "def conv_tma" in src
    seen = []
    real = runtime.launch

    def counting(kernel, grid, *args, **kw):
        if kernel.name.startswith("split_tf32") or kernel.name == "k0_pointwise":
            seen.append(kernel.name)
        return real(kernel, grid, *args, **kw)
    monkeypatch.setattr(runtime, "launch", counting)
    p = tmp_path / f"conv_{tf32}.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(f"gpu_lowered_conv_split_{tf32}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    conv, xd = conv.to(DEV), x.to(DEV)
    with torch.no_grad():
        outs = [mod.argus_forward(conv, xd) for _ in range(3)]
        torch.cuda.synchronize()
        assert seen == ["k0_pointwise", "split_tf32"] and all(torch.equal(o, outs[0]) for o in outs)
        ref = torch.nn.functional.conv2d(xd.double(), conv.weight.double(), conv.bias.double(), padding=1)
        _close(outs[0], ref, conv(xd), tf32)
        conv.weight.mul_(-0.5)
        out = mod.argus_forward(conv, xd)
        torch.cuda.synchronize()
        assert seen == ["k0_pointwise", "split_tf32"] * 2
        ref = torch.nn.functional.conv2d(xd.double(), conv.weight.double(), conv.bias.double(), padding=1)
        _close(out, ref, conv(xd), tf32)


def _close(out, ref, eager, tf32):
    """3xTF32: no worse than eager fp32 cuDNN (x 1.5); one TF32 pass: within TF32's own error (2^-10 in norm)."""
    assert _rel(out, ref) <= (2.0**-10 if tf32 else 1.5 * _rel(eager, ref) + 1e-7), (_rel(out, ref), _rel(eager, ref))
