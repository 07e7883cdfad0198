"""The slow problems' lowerings on a real GPU: a bf16 nn.Linear read in place by gemm_hopper's K-major form
with its bias as the accumulator's initial value and a bf16 store (then GELU + LayerNorm), against eager on
the GPU and float64; adaptive average pooling summed one pooled dim at a time, against float64. Skips
without a GPU."""

from __future__ import annotations

import importlib.util

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

import torch.nn.functional as F  # noqa: E402

from argus_agent.lower import lower_model, render_program  # noqa: E402
from argus_agent.runtime import launch as real_launch  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")


class LinearGeluNorm(torch.nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = torch.nn.Linear(k, n).to(torch.bfloat16)
        self.norm = torch.nn.LayerNorm(n).to(torch.bfloat16)

    def forward(self, x):
        return self.norm(F.gelu(self.fc(x)))


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def _lowered(model, inputs, tmp_path, name):
    prog = lower_model(model, inputs, "sm_90a")
    p = tmp_path / f"{name}.py"
    p.write_text(render_program(prog))
    spec = importlib.util.spec_from_file_location(f"gpu_slow_{name}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    calls = []

    def recording(kernel, grid, *args, **constexprs):
        calls.append((kernel.name, constexprs))
        return real_launch(kernel, grid, *args, **constexprs)
    mod.launch = recording
    return mod, calls


@pytest.mark.parametrize("M,K,N", [(320, 128, 256), (2048, 1024, 2048), (8192, 4096, 8192)],
                         ids=["small", "large", "level2_054"])
@pytest.mark.parametrize("addend_init", [False, True], ids=["default", "addend_init"])
def test_bf16_linear_gelu_layernorm_on_gpu(tmp_path, M, K, N, addend_init, monkeypatch, request):
    """Default: the GEMM stores f32 and the bias with eager's rounding runs after it; ARGUS_GEMM_ADDEND_INIT=1:
    the bias is the accumulator's initial value and the GEMM stores bf16 (level2/054's size was outside eager's
    tolerance with it in the H100 suite on 2026-11-24: this case says whether that recurs)."""
    from argus_agent.lower import templates

    if addend_init and M == 8192:
        # H100, 2026-11-24 (twice): at 054's size the opt-in form (one rounding of bias + product where eager
        # rounds the product to bf16, then the sum) leaves elements outside eager's 1e-2 after the LayerNorm.
        # That is why it is opt-in; the case stays to say when it changes.
        request.applymarker(pytest.mark.xfail(reason="ARGUS_GEMM_ADDEND_INIT rounds once where eager rounds "
                                              "twice: outside eager's 1e-2 at 8192x4096x8192", strict=False))
    monkeypatch.setattr(templates, "GEMM_ADDEND_INIT", addend_init)
    torch.manual_seed(M)
    model = LinearGeluNorm(K, N)
    x = torch.randn(M, K).to(torch.bfloat16)
    mod, calls = _lowered(model, [x], tmp_path, f"linear_{M}")
    gm, xg = model.to(DEV), x.to(DEV)
    with torch.no_grad():
        for _ in range(2):
            out = mod.argus_forward(gm, xg)
        ref = gm(xg)
    assert calls[0][0].startswith("gemm_hopper") and calls[0][1].get("B_NK") == 1, calls
    assert len(calls) == (4 if addend_init else 6), calls   # two calls of: the GEMM (, bias), rows: no copy
    torch.testing.assert_close(out.double(), ref.double(), rtol=1e-2, atol=1e-2)
    m64 = LinearGeluNorm(K, N).double()
    m64.load_state_dict({k: v.double().cpu() for k, v in model.state_dict().items()})
    with torch.no_grad():
        exact = m64(x.double())
    ours, eager = (out.cpu().double() - exact).abs(), (ref.cpu().double() - exact).abs()
    assert ours.mean() <= 1.1 * eager.mean() and ours.max() <= 1.5 * eager.max(), (ours.max(), eager.max())


def test_bf16_mm_output_stored_by_the_gemm_on_gpu(tmp_path):
    g = torch.Generator().manual_seed(4)
    a, b = torch.randn(2048, 1024, generator=g).bfloat16(), torch.randn(1024, 1536, generator=g).bfloat16()
    mod, calls = _lowered(Fn(lambda x, y: x @ y), [a, b], tmp_path, "mm_out")
    with torch.no_grad():
        out = mod.argus_forward(None, a.to(DEV), b.to(DEV)).cpu()
    assert [c[0] for c in calls] == ["gemm_hopper_e0"], calls     # one kernel: the GEMM stores the output
    assert out.dtype == torch.bfloat16
    ref = a.double() @ b.double()
    step = torch.finfo(torch.bfloat16).eps * ref.abs().clamp_min(2.0**-6)
    assert bool(((out.double() - ref.bfloat16().double()).abs() <= 1.01 * step).all())


@pytest.mark.parametrize("shape,out", [((4, 64, 127, 129), (7, 7)), ((2, 8, 19, 70, 33), (3, 5, 4))],
                         ids=["2d", "3d"])
def test_adaptive_avg_pool_large_windows_on_gpu(tmp_path, shape, out):
    fn = F.adaptive_avg_pool2d if len(out) == 2 else F.adaptive_avg_pool3d
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(9))
    mod, calls = _lowered(Fn(lambda t: fn(t, out)), [x], tmp_path, f"pool_{len(out)}d")
    with torch.no_grad():
        got = mod.argus_forward(None, x.to(DEV)).cpu()
    assert len(calls) == len(out), calls
    torch.testing.assert_close(got.double(), fn(x.double(), out), rtol=1e-5, atol=1e-5)
