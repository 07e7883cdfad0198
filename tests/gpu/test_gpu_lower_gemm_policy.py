"""Lowered bf16 matmuls at gemm_hopper.policy's constexprs (split-K, the small and large classes) and fp32
matmuls under --precision bf16 / tf32, on a real GPU against float64 of the rounded operands (bf16, or TF32
heads). Skips without a GPU."""

from __future__ import annotations

import importlib.util

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

from argus_agent.lower import lower_model, render_program  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")


class MM(torch.nn.Module):
    def forward(self, a, b):
        return torch.relu(a @ b).float()


@pytest.mark.parametrize("M,N,K,dtype,precision", [
    (128, 256, 8192, torch.bfloat16, None),       # skinny: split-K into the zeroed output
    (512, 512, 1024, torch.bfloat16, None),       # small: 64 x 128 tiles, one consumer warpgroup
    (2048, 2048, 2048, torch.bfloat16, None),     # large
    (1024, 1024, 1024, torch.float32, "bf16"),    # fp32 operands, --precision bf16
    (1024, 768, 2048, torch.float32, "tf32"),     # fp32 operands, --precision tf32: gemm_fp32 PASSES=1
], ids=["skinny_split_k", "small", "large", "fp32_as_bf16", "fp32_as_tf32"])
def test_lowered_gemm_policy_on_gpu(tmp_path, M, N, K, dtype, precision):
    g = torch.Generator().manual_seed(M + N + K)
    a, b = torch.randn(M, K, generator=g).to(dtype), torch.randn(K, N, generator=g).to(dtype)
    prog = lower_model(MM(), [a, b], "sm_90a", precision)
    src = render_program(prog)
    assert "launch(gemm_" in src
    p = tmp_path / f"mm_{M}_{N}_{K}.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(f"gpu_gemm_policy_{M}_{N}_{K}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        for _ in range(2):        # twice: the split-K output is zeroed per call, not once
            out = mod.argus_forward(MM(), a.to(DEV), b.to(DEV)).cpu().double()
    if precision == "tf32":
        from tilepy.instructions import round_tf32
        assert "PASSES=1" in src
        ah, bh = (torch.from_numpy(round_tf32(x.numpy())).double() for x in (a, b))
        ref = torch.relu(ah @ bh)
    else:
        ref = torch.relu(a.bfloat16().double() @ b.bfloat16().double())
    err = ((out - ref).abs() / (ref.abs() + 1)).max().item()
    # a bf16 program's product is rounded to bf16 as eager stores it: up to half a bf16 step (2^-8 relative)
    assert err < (2.0**-7 if dtype == torch.bfloat16 else 1e-3), err


class _Linear(torch.nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = torch.nn.Linear(k, n, bias=True)

    def forward(self, x):
        return torch.relu(self.fc(x))


@pytest.mark.parametrize("M,N,K,form", [(16, 2048, 4096, "linear"), (32, 2048, 1000, "mm"),
                                         (13, 1024, 4096, "linear")])
# (16 x 4096 x 4096 lowers to the cluster split since G19: test_lowered_skinny_rows_run_k_ways_on_gpu)
def test_lowered_decode_rows_run_swap_ab_on_gpu(tmp_path, M, N, K, form):
    """Decode rows lower to gemm_splitk_swap (a Linear's weight read in place, B_NK=1) + splitk_sum: on the GPU,
    twice (the slots are rewritten per call), against float64 of the bf16 operands (the Linear's bf16 output
    rounded as eager rounds it: half a bf16 step)."""
    g = torch.Generator().manual_seed(M + N + K)
    a = torch.randn(M, K, generator=g).bfloat16()
    if form == "linear":
        model = _Linear(K, N).bfloat16()
        inputs = [a]
        with torch.no_grad():
            ref = torch.relu(a.double() @ model.fc.weight.double().T + model.fc.bias.double())
    else:
        model = MM()
        b = torch.randn(K, N, generator=g).bfloat16()
        inputs = [a, b]
        ref = torch.relu(a.double() @ b.double())
    prog = lower_model(model, inputs, "sm_90a")
    src = render_program(prog)
    assert "launch(gemm_splitk_swap" in src and "launch(splitk_sum" in src, src[-1500:]
    assert ("B_NK=1" in src) == (form == "linear")
    p = tmp_path / f"swap_{form}_{M}.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(f"gpu_swap_{form}_{M}_{N}_{K}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = model.to(DEV)
    with torch.no_grad():
        for _ in range(2):
            out = mod.argus_forward(model, *(x.to(DEV) for x in inputs)).cpu().double()
    err = ((out - ref).abs() / (ref.abs() + 1)).max().item()
    assert err < 2.0**-7, err


@pytest.mark.parametrize("M,N,K", [(64, 1024, 4096), (128, 2048, 1000), (48, 2048, 4096)])
# (128 x 4096 x 1000 lowers to swap-AB K_WAYS=2 since G11, 64 x 4096 x 4096 to G14's cluster split (CLUSTER_K=2):
# test_lowered_skinny_rows_run_k_ways_on_gpu)
def test_lowered_split_k_linear_reads_weight_in_place_on_gpu(tmp_path, M, N, K):
    """A bf16 Linear whose gemm_hopper policy splits K reads its (N, K) weight in place (B_NK=1, the output zeroed
    and the split's partial tiles added atomically): on the GPU, twice, against float64."""
    g = torch.Generator().manual_seed(M + N + K)
    a = torch.randn(M, K, generator=g).bfloat16()
    model = _Linear(K, N).bfloat16()
    with torch.no_grad():
        ref = torch.relu(a.double() @ model.fc.weight.double().T + model.fc.bias.double())
    prog = lower_model(model, [a], "sm_90a")
    src = render_program(prog)
    assert "B_NK=1" in src and "SPLIT_K=" in src and ".zero_()" in src, src[-1500:]
    p = tmp_path / f"nk_split_{M}_{N}_{K}.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(f"gpu_nk_split_{M}_{N}_{K}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = model.to(DEV)
    with torch.no_grad():
        for _ in range(2):
            out = mod.argus_forward(model, a.to(DEV)).cpu().double()
    err = ((out - ref).abs() / (ref.abs() + 1)).max().item()
    assert err < 2.0**-7, err


@pytest.mark.parametrize("M,N,K,form", [(128, 4096, 4096, "linear"), (100, 4096, 1000, "mm"),
                                         (80, 2200, 448, "linear"), (64, 4096, 4096, "linear"),
                                         (24, 4096, 4096, "linear"), (16, 4096, 4096, "linear"),
                                         (192, 4096, 1000, "linear")])
def test_lowered_skinny_rows_run_k_ways_on_gpu(tmp_path, M, N, K, form):
    """65-128 rows whose 64 x 64 tiles of C^T fill half a wave to one lower to gemm_splitk_swap K_WAYS=2 (two consumer
    warpgroups over one tile, alternate k-tiles; unsplit, no splitk_sum), a Linear's weight read in place: on the
    GPU, twice, against float64 of the bf16 operands. With enough k-tiles (32-64 by rows) it is G14's cluster split
    (CLUSTER_K=2, one row tile, rank 1's sum read through distributed shared memory); shorter K keeps G11's unsplit
    two row tiles (M_SHIFT), and so do 81-128 rows at any K and 129-256 rows (two row tiles of M / 2: G27)."""
    g = torch.Generator().manual_seed(M + N + K)
    a = torch.randn(M, K, generator=g).bfloat16()
    if form == "linear":
        model = _Linear(K, N).bfloat16()
        inputs = [a]
        with torch.no_grad():
            ref = torch.relu(a.double() @ model.fc.weight.double().T + model.fc.bias.double())
    else:
        model = MM()
        b = torch.randn(K, N, generator=g).bfloat16()
        inputs = [a, b]
        ref = torch.relu(a.double() @ b.double())
    src = render_program(lower_model(model, inputs, "sm_90a"))
    assert "launch(gemm_splitk_swap" in src and "K_WAYS=2" in src and "launch(splitk_sum" not in src, src[-1500:]
    assert ("B_NK=1" in src) == (form == "linear")
    assert ("CLUSTER_K=2" in src) == (K >= 4096 and M <= 80), src[-1500:]
    p = tmp_path / f"kways_{form}_{M}.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(f"gpu_kways_{form}_{M}_{N}_{K}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = model.to(DEV)
    with torch.no_grad():
        for _ in range(2):
            out = mod.argus_forward(model, *(x.to(DEV) for x in inputs)).cpu().double()
    err = ((out - ref).abs() / (ref.abs() + 1)).max().item()
    assert err < 2.0**-7, err
