"""The second lowering probe's ops on a real GPU (sm_90a): lgamma, digamma (float64 inside, the reflection's sine
in fp32), i0, copysign / signbit and addbmm, lowered, rendered to HIP C++, compiled and run, against torch in
float64 on the same inputs. Skips without a GPU."""

from __future__ import annotations

import importlib.util

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

from argus_agent.lower import lower_model, render_program  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def _run_on_gpu(fn, inputs, tmp_path, name):
    model = Fn(fn)
    src = render_program(lower_model(model, inputs, "sm_90a"))
    p = tmp_path / f"{name}.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(f"gpu_special_{name}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        return mod.argus_forward(model, *[x.to(DEV) for x in inputs]).cpu()


_X = torch.cat([torch.linspace(-6.7, 12.3, 4001),
                torch.tensor([0.0, -0.0, -1.0, -3.0, 1.0, 2.0, 1e-6, -2.5, -5.9857, 30.0, 100.5, 1e6])])


@pytest.mark.parametrize("fn", [torch.lgamma, torch.digamma], ids=["lgamma", "digamma"])
def test_lgamma_and_digamma_on_gpu_match_float64(fn, tmp_path):
    out = _run_on_gpu(fn, [_X], tmp_path, fn.__name__)
    want = fn(_X.double())
    assert torch.equal(torch.isnan(out), torch.isnan(want))
    assert torch.equal(torch.isinf(out), torch.isinf(want))
    fin = torch.isfinite(want)
    # float64 inside, the reflection's sine in fp32, rounded once (the CPU interpreter's bound, same kernel)
    assert torch.allclose(out[fin].double(), want[fin], rtol=2.5e-7, atol=2.5e-7), \
        ((out[fin].double() - want[fin]).abs() / (want[fin].abs() + 1)).max()


def test_i0_on_gpu_matches_float64(tmp_path):
    x = torch.linspace(-20, 20, 4001)
    out = _run_on_gpu(torch.special.i0, [x], tmp_path, "i0")
    want = torch.special.i0(x.double())
    assert torch.allclose(out.double(), want, rtol=3e-7, atol=0), ((out.double() - want).abs() / want).max()


def test_copysign_and_signbit_on_gpu_follow_negative_zeros(tmp_path):
    a = torch.tensor([[1.5, -2.0, 0.0, -0.0, 3.0, float("inf")]] * 64)
    b = torch.tensor([[-0.0, 0.0, -1.0, 2.0, -float("inf"), -3.0]] * 64)
    out = _run_on_gpu(torch.copysign, [a, b], tmp_path, "copysign")
    want = torch.copysign(a, b)
    assert torch.equal(out, want) and torch.equal(torch.signbit(out), torch.signbit(want))
    bits = _run_on_gpu(torch.signbit, [b], tmp_path, "signbit")
    assert torch.equal(bits, torch.signbit(b))


def test_addbmm_on_gpu_matches_float64(tmp_path):
    g = torch.Generator().manual_seed(3)
    c, a, b = torch.randn(65, 71, generator=g), torch.randn(6, 65, 40, generator=g), torch.randn(6, 40, 71, generator=g)
    out = _run_on_gpu(lambda c, a, b: torch.addbmm(c, a, b, beta=0.5, alpha=-1.5), [c, a, b], tmp_path, "addbmm")
    want = torch.addbmm(c.double(), a.double(), b.double(), beta=0.5, alpha=-1.5)
    # an fp32 program: fp32 accuracy (the lowering's fp32 GEMM is TF32-free unless the user asks)
    assert torch.allclose(out.double(), want, rtol=1e-5, atol=1e-5), (out.double() - want).abs().max()
