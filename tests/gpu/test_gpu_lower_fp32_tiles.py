"""Lowered fp32 matmuls on launch_policy's tiles (128 x 96, 128 x 64, 64 x 64 one consumer, TMA_ONLY copies) on a
real GPU: twice (the workspaces are reused), against float64, within twice the error of cuBLAS SGEMM (TF32 off) on
the same inputs; an input 4 bytes into its storage (the program binds an aligned copy for the TMA-only kernels) and
a fused epilogue. Skips without a GPU."""

from __future__ import annotations

import copy
import importlib.util
import re

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

from argus_agent.lower import lower_model, render_program  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")


class MM(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


def _run(tmp_path, model, inputs, name):
    """(the program's source, its output on the GPU): lowered from CPU copies of the model and inputs."""
    cpu = copy.deepcopy(model).cpu()
    src = render_program(lower_model(cpu, [x.cpu() for x in inputs], "sm_90a"))
    p = tmp_path / f"{name}.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(f"gpu_fp32_tiles_{name}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        for _ in range(2):
            out = mod.argus_forward(model, *inputs)
    torch.cuda.synchronize()
    return src, out


def _sgemm_err(f, ref):
    torch.backends.cuda.matmul.allow_tf32 = False
    with torch.no_grad():
        return (f().double() - ref).abs().max().item()


@pytest.mark.parametrize("M,N,K,name", [
    (1024, 1024, 1024, "gemm_fp32_raw_bn64_tma"),
    (2051, 2045, 1000, "gemm_fp32_raw_bn96_tma"),
    (1536, 1536, 1536, "gemm_fp32_raw_bn96_tma"),
    (512, 512, 512, "gemm_fp32_raw_bm64_bn64_consumers1_tma"),
    (1000, 1000, 1002, "gemm_fp32"),       # K % 4 != 0: A split first, policy's split-K (the narrow tile lost)
], ids=["1024", "ragged", "1536", "512", "k1002"])
@pytest.mark.parametrize("offset", [0, 1], ids=["aligned", "offset4"])
def test_lowered_fp32_tiles_on_gpu(tmp_path, M, N, K, name, offset):
    g = torch.Generator(device=DEV).manual_seed(M + N + K + offset)
    a = torch.randn(M * K + offset, device=DEV, generator=g)[offset:].view(M, K)
    b = torch.randn(K, N, device=DEV, generator=g)
    src, out = _run(tmp_path, MM(), [a, b], f"mm{M}_{N}_{K}_{offset}")
    assert re.findall(r"launch\((gemm_fp32\w*),", src) == [name]
    ref = a.double() @ b.double()
    err = (out.double() - ref).abs().max().item()
    assert err <= 2 * _sgemm_err(lambda: a @ b, ref) + 1e-6 * ref.abs().max().item(), err


def test_lowered_fp32_fused_epilogue_on_small_tiles(tmp_path):
    """Linear + bias + ReLU at 1024^3: the fused kernel on 128 x 64 tiles, TMA_ONLY."""
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU()).to(DEV)
    x = torch.randn(1024, 1024, device=DEV)
    src, out = _run(tmp_path, model, [x], "fused")
    (name,) = re.findall(r"launch\((gemm_fp32\w*),", src)
    assert name.startswith("gemm_fp32_e") and "BN: tp.constexpr = 64" in src.split(f"def {name}(")[1][:1500]
    with torch.no_grad():
        ref = torch.relu(x.double() @ model[0].weight.double().T + model[0].bias.double())
        err = (out.double() - ref).abs().max().item()
    assert err <= 2 * _sgemm_err(lambda: model(x), ref) + 1e-6 * ref.abs().max().item(), err


class _Lin(torch.nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = torch.nn.Linear(k, n)

    def forward(self, x):
        return torch.relu(self.fc(x))


@pytest.mark.parametrize("M,N,K,form", [(128, 4096, 4096, "linear"), (16, 1024, 4096, "linear"),
                                         (64, 4096, 4096, "mm"), (24, 1024, 1000, "mm"), (256, 2048, 1024, "mm")])
@pytest.mark.parametrize("offset", [0, 1], ids=["aligned", "offset4"])
def test_lowered_fp32_swap_ab_on_gpu(tmp_path, M, N, K, form, offset):
    """At most SWAP_ROWS rows: the swap-AB kernel (the weight read as it is; one 4 bytes into its storage is copied
    aligned for its tensor map), split-K's sum with the bias and ReLU, twice, against float64."""
    g = torch.Generator(device=DEV).manual_seed(M + N + K + offset)
    x = torch.randn(M * K + offset, device=DEV, generator=g)[offset:].view(M, K)
    if form == "linear":
        model = _Lin(K, N).to(DEV)
        inputs = [x]
        with torch.no_grad():
            ref = torch.relu(x.double() @ model.fc.weight.double().T + model.fc.bias.double())
    else:
        model = MM()
        b = torch.randn(K * N + offset, device=DEV, generator=g)[offset:].view(K, N)
        inputs = [x, b]
        ref = x.double() @ b.double()
    src, out = _run(tmp_path, model, inputs, f"swap_{form}_{M}_{offset}")
    assert re.findall(r"launch\((gemm_fp32\w*),", src) == ["gemm_fp32_s0"]
    err = (out.double() - ref).abs().max().item()
    assert err <= 2 * _sgemm_err(lambda: model(*inputs), ref) + 1e-6 * ref.abs().max().item(), err
