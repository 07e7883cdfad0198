"""Lowered bf16 matmuls launch the stdlib GEMM at `gemm_hopper.policy(M, N, K)`'s constexprs (shape class,
split-K): the launch's keyword constexprs and grid are the policy's, the kernel's defaults in the candidate are
the same values (the agent's build gate compiles kernels at their defaults), and the result (run on the
interpreter) matches float64 matmul of the bf16 operands."""

from __future__ import annotations

import importlib.util

import pytest
import torch

import tilepy as tp
from argus_agent.lower import lower_model, render_program
from argus_agent.runtime import launch as real_launch
from stdlib_kernels import gemm_hopper


class MM(torch.nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b).float()


def _run(tmp_path, M, N, K):
    g = torch.Generator().manual_seed(M + N + K)
    a = torch.randn(M, K, generator=g).bfloat16()
    b = torch.randn(K, N, generator=g).bfloat16()
    src = render_program(lower_model(MM(), [a, b], "sm_90a"))
    mod, calls, out = _recorded(src, tmp_path, f"mm_policy_{M}_{N}_{K}", MM(), [a, b])
    ref = a.double() @ b.double()
    return src, mod, [(name, grid, constexprs) for name, grid, _, constexprs in calls], out, ref


def _recorded(src: str, tmp_path, name: str, model, inputs):
    """Import the candidate `src` and run its argus_forward with every launch recorded: (module, [(kernel name,
    grid, args, constexprs)], output)."""
    p = tmp_path / f"{name}.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(name, p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    calls = []

    def recording(kernel, grid, *args, **constexprs):
        calls.append((kernel.name, grid, args, constexprs))
        return real_launch(kernel, grid, *args, **constexprs)
    mod.launch = recording
    with torch.no_grad():
        out = mod.argus_forward(model, *inputs)
    return mod, calls, out


@pytest.mark.parametrize("M,N,K", [(128, 128, 1024), (320, 256, 128)], ids=["skinny_split_k", "small"])
def test_lowered_gemm_runs_the_policy(tmp_path, M, N, K):
    src, mod, calls, out, ref = _run(tmp_path, M, N, K)
    want = gemm_hopper.policy(M, N, K)
    # the plain kernel stores the bf16 result itself (eager's rounding, fused into its store, at the bf16
    # policy); a split-K GEMM adds f32 partial tiles and the rounding is a pass after it
    fused = want.get("SPLIT_K", 1) == 1 and not want.get("PERSISTENT")
    if fused:
        want = gemm_hopper.policy(M, N, K, tp.bf16)
    gemm = [c for c in calls if c[0].startswith("gemm_")]
    assert len(gemm) == 1, calls
    name, grid, constexprs = gemm[0]
    assert name == ("gemm_hopper_e0" if fused else "gemm_persistent" if want.get("PERSISTENT") else "gemm_hopper")
    assert constexprs == gemm_hopper.kernel_params(want)
    assert tuple(grid) == tuple(gemm_hopper.grid_of(M, N, want))
    if M == 128:
        assert want.get("SPLIT_K", 1) > 1      # the case meant to cover split-K does split
    # the candidate's kernel carries the policy's constexprs as its defaults
    defaults = getattr(mod, name).resolve_constexprs({})
    assert {k: defaults[k] for k in constexprs} == constexprs
    # eager rounds the bf16 product once: within one bf16 step of the float64 product rounded to bf16 (f32
    # accumulation may land on the other side of a rounding boundary), and no more than that step from it
    step = torch.finfo(torch.bfloat16).eps * ref.abs().clamp_min(2.0**-6)   # one bf16 step at |ref|
    err = (out.double() - ref.bfloat16().double()).abs()
    assert bool((err <= 1.01 * step).all()), err.max().item()


class _Linear(torch.nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = torch.nn.Linear(k, n, bias=False)

    def forward(self, x):
        return self.fc(x).float()


@pytest.mark.parametrize("M,N,K,form", [(16, 256, 1024, "mm"), (13, 256, 1024, "linear")])
def test_decode_rows_lower_to_swap_ab(tmp_path, M, N, K, form):
    """Decode rows (<= 32) lower to gemm_splitk_swap at `gemm_hopper.launch`'s own swap-AB policy (C^T = B^T A^T,
    split-K into slots, splitk_sum after it) instead of gemm_hopper's 64-row tiles; a Linear's (N, K) weight is read
    in place (B_NK=1, no transposing copy). Run on the interpreter: float64's value of the bf16 operands to within
    one bf16 step, and every kernel of the candidate translates at its defaults."""
    from stdlib_kernels import gemm_hopper

    want = gemm_hopper.policy(M, N, K, tp.f32, fixup=True)
    assert want.get("SWAP_AB") == 1 and want["SPLIT_K"] > 1
    g = torch.Generator().manual_seed(M + N + K)
    a = torch.randn(M, K, generator=g).bfloat16()
    if form == "mm":
        b = torch.randn(K, N, generator=g).bfloat16()
        model, inputs, ref = MM(), [a, b], a.double() @ b.double()
    else:
        model = _Linear(K, N).bfloat16()
        with torch.no_grad():
            model.fc.weight.copy_(torch.randn(N, K, generator=g).bfloat16())
        inputs, ref = [a], a.double() @ model.fc.weight.double().T
    prog = lower_model(model, inputs, "sm_90a")
    src = render_program(prog)
    mod, calls, out = _recorded(src, tmp_path, f"swap_{form}_{M}", model, inputs)
    names = [c[0] for c in calls]
    gemm = [c for c in calls if c[0].startswith("gemm_")]
    assert len(gemm) == 1 and gemm[0][0].startswith("gemm_splitk_swap"), names
    assert names[names.index(gemm[0][0]) + 1] == "splitk_sum", names
    name, grid, args, constexprs = gemm[0]
    assert constexprs == gemm_hopper.kernel_params({**want, **({"B_NK": 1} if form == "linear" else {})})
    assert tuple(grid) == tuple(gemm_hopper.grid_of(M, N, want))
    if form == "linear":     # the weight itself, (N, K), no copy
        assert args[1].shape == (N, K) and args[1].data_ptr() == model.fc.weight.data_ptr()
    defaults = getattr(mod, name).resolve_constexprs({})
    assert {k: defaults[k] for k in constexprs} == constexprs
    for k in vars(mod).values():
        if isinstance(k, tp.Kernel) and k.fn.__module__ == mod.__name__:
            k.ir("sm_90a")
    step = torch.finfo(torch.bfloat16).eps * ref.abs().clamp_min(2.0**-6)
    err = (out.double() - ref.bfloat16().double()).abs()
    assert bool((err <= 1.01 * step).all()), err.max().item()


@pytest.mark.parametrize("M", [64, 128])
def test_split_k_linear_reads_its_weight_in_place(tmp_path, M):
    """A bf16 Linear whose gemm_hopper policy splits K (33-256 rows: decode / skinny) reads its (N, K) weight in
    place (B_NK=1; before, only the plain kernel did, and a split paid a transposing copy of the weight per call):
    the output zeroed, then gemm_hopper's split-K at the policy's constexprs; interpreter vs float64."""
    from stdlib_kernels import gemm_hopper

    N, K = 256, 1024
    want = gemm_hopper.policy(M, N, K, tp.f32)
    assert want.get("SPLIT_K", 1) > 1 and not want.get("SWAP_AB")
    g = torch.Generator().manual_seed(M)
    a = torch.randn(M, K, generator=g).bfloat16()
    model = _Linear(K, N).bfloat16()
    with torch.no_grad():
        model.fc.weight.copy_(torch.randn(N, K, generator=g).bfloat16())
    prog = lower_model(model, [a], "sm_90a")
    src = render_program(prog)
    assert ".zero_()" in src
    mod, calls, out = _recorded(src, tmp_path, f"nk_split_{M}", model, [a])
    gemm = [c for c in calls if c[0].startswith("gemm_")]
    assert len(gemm) == 1, [c[0] for c in calls]
    name, grid, args, constexprs = gemm[0]
    assert name.startswith("gemm_hopper_nk") and constexprs == gemm_hopper.kernel_params({**want, "B_NK": 1})
    assert tuple(grid) == tuple(gemm_hopper.grid_of(M, N, want))
    assert args[1].shape == (N, K) and args[1].data_ptr() == model.fc.weight.data_ptr()     # in place, no copy
    for k in vars(mod).values():
        if isinstance(k, tp.Kernel) and k.fn.__module__ == mod.__name__:
            k.ir("sm_90a")
    ref = a.double() @ model.fc.weight.double().T
    step = torch.finfo(torch.bfloat16).eps * ref.abs().clamp_min(2.0**-6)
    err = (out.double() - ref.bfloat16().double()).abs()
    assert bool((err <= 1.01 * step).all()), err.max().item()


def _lowered_swap_gemm(tmp_path, form: str, M: int, N: int, K: int, tag: str) -> tuple:
    """Lower a (M, K) x (K, N) matmul ("mm") or a Linear of an (N, K) weight ("linear") for sm_90a and run it on the
    interpreter: the one GEMM launch must be gemm_splitk_swap with `launch`'s policy constexprs and no splitk_sum,
    a Linear's weight read in place, and the result within one bf16 step of float64. Returns (policy, grid,
    constexprs) of that launch."""
    from stdlib_kernels import gemm_hopper

    want = gemm_hopper.policy(M, N, K, tp.f32, fixup=True)
    g = torch.Generator().manual_seed(M + N + K)
    a = torch.randn(M, K, generator=g).bfloat16()
    if form == "mm":
        b = torch.randn(K, N, generator=g).bfloat16()
        model, inputs, ref = MM(), [a, b], a.double() @ b.double()
    else:
        model = _Linear(K, N).bfloat16()
        with torch.no_grad():
            model.fc.weight.copy_(torch.randn(N, K, generator=g).bfloat16())
        inputs, ref = [a], a.double() @ model.fc.weight.double().T
    src = render_program(lower_model(model, inputs, "sm_90a"))
    mod, calls, out = _recorded(src, tmp_path, f"{tag}_{form}", model, inputs)
    names = [c[0] for c in calls]
    gemm = [c for c in calls if c[0].startswith("gemm_")]
    assert len(gemm) == 1 and gemm[0][0].startswith("gemm_splitk_swap") and "splitk_sum" not in names, names
    name, grid, args, constexprs = gemm[0]
    assert constexprs == gemm_hopper.kernel_params({**want, **({"B_NK": 1} if form == "linear" else {})})
    assert tuple(grid) == tuple(gemm_hopper.grid_of(M, N, want))
    if form == "linear":
        assert args[1].shape == (N, K) and args[1].data_ptr() == model.fc.weight.data_ptr()
    defaults = getattr(mod, name).resolve_constexprs({})
    assert {k: defaults[k] for k in constexprs} == constexprs
    step = torch.finfo(torch.bfloat16).eps * ref.abs().clamp_min(2.0**-6)
    err = (out.double() - ref.bfloat16().double()).abs()
    assert bool((err <= 1.01 * step).all()), err.max().item()
    return want, tuple(grid), constexprs


@pytest.mark.parametrize("form", ["linear", "mm"])
def test_skinny_rows_lower_to_swap_k_ways(tmp_path, form):
    """65-128 rows whose 64 x 64 tiles of C^T fill half a wave to one: `launch`'s policy is swap-AB with both consumer
    warpgroups over one tile on alternate k-tiles (gemm_splitk_swap K_WAYS=2, unsplit: C stored by the kernel, no
    splitk_sum), and the lowering follows it (a Linear's (N, K) weight read in place); interpreter vs float64."""
    want, grid, constexprs = _lowered_swap_gemm(tmp_path, form, 100, 2176, 256, "kways")
    assert (want.get("SWAP_AB"), want.get("K_WAYS"), want["SPLIT_K"], want["BM"], want["BN"]) == (1, 2, 1, 64, 64)
    assert constexprs["K_WAYS"] == 2 and grid == (2, 34, 1)


@pytest.mark.parametrize("form", ["mm", "linear"])
def test_rows_lower_to_the_cluster_split(tmp_path, form, monkeypatch):
    """32-128 rows whose 64-column tiles, split over K in two, fill half a wave to one: `launch`'s policy is G14's
    CLUSTER_K=2 (one row tile, K split over a cluster's two blocks, summed through distributed shared memory, no
    splitk_sum), and the lowering follows it (a Linear's weight read in place); interpreter vs float64. (The policy's
    K threshold, 64 k-tiles at these rows, lowered to 8 here: the interpreter's time.)"""
    from stdlib_kernels import gemm_hopper

    monkeypatch.setattr(gemm_hopper, "CLUSTER_SPLIT_MIN_K_TILES", {128: 8})
    monkeypatch.setattr(gemm_hopper, "CLUSTER_SPLIT_MAX_M", 128)     # (G27: 81-128 rows take two row tiles now)
    want, grid, constexprs = _lowered_swap_gemm(tmp_path, form, 100, 2176, 520, "clusterk")
    assert (want.get("SWAP_AB"), want.get("CLUSTER_K"), want["SPLIT_K"], want["BM"], want["BN"]) == (1, 2, 1, 104, 64)
    assert constexprs["CLUSTER_K"] == 2 and grid == (1, 34, 2)
