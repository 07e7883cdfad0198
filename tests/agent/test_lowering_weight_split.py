"""The lowered fp32 GEMM splits a weight (a model parameter, its B operand) into TF32 halves once, not on every
call (argus_agent.runtime.weight_split): a lowered Linear (B read as (N, K)), a parameter used as torch.matmul's
(K, N) B and a convolution's weight (conv_tma and conv_igemm, 3xTF32 and one TF32 pass), each called twice, split
once; after an in-place change of the weight (under no_grad: torch's version
counter moves) the next call splits again and its output follows the new weight (float64 reference). Lowered
for sm_90a, run on the CPU interpreter."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from argus_agent import runtime
from argus_agent.policy import check_source

from .lowered import assert_close, run_lowered


class MatmulParam(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.w = nn.Parameter(torch.randn(k, n) / k**0.5)

    def forward(self, x):
        return x @ self.w


def _splits(monkeypatch, also=()):
    """The names of the split_tf32(_t) launches (and of the kernels named in `also`) from now on."""
    seen = []
    real = runtime.launch

    def counting(kernel, grid, *args, **kw):
        if kernel.name.startswith("split_tf32") or kernel.name in also:   # (the lowered module binds this launch)
            seen.append(kernel.name)
        return real(kernel, grid, *args, **kw)
    monkeypatch.setattr(runtime, "launch", counting)
    return seen


def _case(monkeypatch, tmp_path, model, x, weight, name, tol=1e-4, prep=None):
    """`prep`: the name of a kernel that makes the split's input from the weight (conv_tma's reordering), which
    must run with the split and only then; each entry of `seen` is then a (prep, split) pair."""
    torch.manual_seed(0)
    raw = _splits(monkeypatch, (prep,) if prep else ())
    seen = _Pairs(raw) if prep else raw
    prog, src, out, ref = run_lowered(model, [x], tmp_path, name)
    assert check_source(src, f"{name}.py") == ""
    assert "weight_split(split_tf32" in src and "launch(split_tf32" not in src
    if prep:
        assert f"prep=lambda: launch({prep}," in src and src.count(f"launch({prep},") == 1
    assert_close(out, ref, tol)
    assert len(seen) == 1                                   # the first call split the weight (A: in registers)
    import importlib.util
    spec = importlib.util.spec_from_file_location(f"again_{name}", tmp_path / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        out2 = mod.argus_forward(model, x)                  # run_lowered's model.float() gave it new data: split
        assert len(seen) == 2
        assert torch.equal(out2, mod.argus_forward(model, x))
    assert len(seen) == 2                                   # the next call reused the halves
    with torch.no_grad():
        weight(model).add_(1.0)                             # in place: same storage, version counter moves
        out3 = mod.argus_forward(model, x)
        ref3 = model.double()(x.double())
    model.float()
    assert len(seen) == 3                                   # split again after the change
    assert_close(out3, ref3, tol)
    assert not torch.allclose(out3, out2, atol=1e-2)        # the output followed the weight


def test_lowered_linear_splits_its_weight_once(monkeypatch, tmp_path):
    torch.manual_seed(1)
    lin = nn.Linear(96, 80, bias=False)
    _case(monkeypatch, tmp_path, lin, torch.randn(300, 96), lambda m: m.weight, "linear")   # (<= 256 rows: swap-AB)


def test_lowered_matmul_with_a_kn_parameter_splits_it_once(monkeypatch, tmp_path):
    torch.manual_seed(2)
    _case(monkeypatch, tmp_path, MatmulParam(96, 72), torch.randn(300, 96), lambda m: m.w, "matmul_kn")


class _Pairs:
    """A count of (prep, split) launch pairs in a list of launch names, checking each prep came with a split."""

    def __init__(self, names):
        self.names = names

    def __len__(self):
        assert len(self.names) % 2 == 0 and all(a.startswith("k") and b.startswith("split_tf32")
                                                for a, b in zip(self.names[::2], self.names[1::2])), self.names
        return len(self.names) // 2


@pytest.mark.parametrize("tf32", [False, True])
@pytest.mark.parametrize("kernel", ["conv_tma", "conv_igemm"])
def test_lowered_conv_splits_its_weight_once(kernel, tf32, monkeypatch, tmp_path):
    """A direct convolution's weight (a parameter, the implicit GEMM's B) is split once per state of it, as a
    Linear's: conv_igemm (a strided grouped one) splits the parameter itself; conv_tma (16 input channels) reorders
    it into its B first (taps x padded channels), and that reordering runs with the split, once per state too (as
    weight_split's prep, keyed on the parameter); 3xTF32 and one TF32 pass."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", tf32)
    torch.manual_seed(3)
    if kernel == "conv_tma":
        conv, xs = nn.Conv2d(16, 32, 3, padding=1), (2, 16, 10, 9)
    else:
        conv, xs = nn.Conv2d(8, 32, 3, stride=2, padding=1, groups=2), (2, 8, 12, 11)
    _case(monkeypatch, tmp_path, conv, torch.randn(xs), lambda m: m.weight, f"conv_{kernel}_{tf32}",
          tol=1e-2 if tf32 else 1e-4, prep="k0_pointwise" if kernel == "conv_tma" else None)
    assert f"def {kernel}(" in (tmp_path / f"conv_{kernel}_{tf32}.py").read_text()


def test_weight_split_follows_data_and_version(monkeypatch):
    """runtime.weight_split on its own: one split per state of the weight; a new one after an in-place change
    or when the tensor is given new data; the halves are split_tf32's."""
    from stdlib_kernels import gemm_fp32

    seen = _splits(monkeypatch)
    w = torch.randn(20, 8)

    def halves():
        return runtime.weight_split(gemm_fp32.split_tf32, (2, 1), w, (20, 8), (1, 20, 8), (20, 8))
    a = halves()
    assert halves()[0] is a[0] and len(seen) == 1
    hi, lo = gemm_fp32.split(w, "nk")
    assert torch.equal(hi, a[0]) and torch.equal(lo, a[1])
    w.mul_(2)                                               # in place
    c = halves()
    assert len(seen) == 2 and torch.equal(c[0], 2 * a[0])
    w.data = torch.randn(20, 8)                             # new data, same tensor object
    d = halves()
    assert len(seen) == 3 and torch.equal(d[0], gemm_fp32.split(w, "nk")[0])
