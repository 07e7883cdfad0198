"""fp32 matmuls lowered for sm_90a run the form gemm_fp32's own `launch` runs for their shape: `launch_policy`'s
tile (unsplit 128 x 96 tiles where their waves are fuller, 128 x 64 or 64 x 64 tiles where a short K would
otherwise be split, TMA_ONLY copies) as the kernel's defaults (the build gate compiles what runs), the inputs bound
16-byte aligned, a model's own tensor read as A keeping the per-element fallback; and swap-AB for at most SWAP_ROWS
rows. The SM count is shrunk so that small shapes take each tile (more than SWAP_ROWS rows there: not swap-AB).
Run on the CPU interpreter against float64, within twice the error of PyTorch's own fp32 result on the same inputs
(the 3xTF32 GEMM is fp32-accurate)."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn as nn

from argus_agent.lower.templates import Fp32GemmTemplate, fuse_epilogues
from stdlib_kernels import gemm_fp32

from .lowered import run_lowered


class MM(nn.Module):
    def forward(self, a, b):
        return a @ b


class WeightFirst(nn.Module):
    """The model's own tensor as the GEMM's A (W @ x)."""

    def __init__(self, m, k):
        super().__init__()
        self.w = nn.Parameter(torch.randn(m, k))

    def forward(self, x):
        return self.w @ x


def _defaults(src: str, name: str) -> dict:
    sig = src.split(f"def {name}(", 1)[1]
    sig = sig[:sig.index('"""')]
    return {k: v.rstrip("):") for k, v in re.findall(r"(\w+): tp\.constexpr = ([^,\n]+)", sig)}


def _check_fp32(out, ref, torch_f32):
    """out within twice the error of PyTorch's own fp32 result `torch_f32` on the same inputs (plus 1e-6 of the
    largest |ref|)."""
    f32 = (torch_f32.double() - ref).abs().max().item()
    err = (out.double() - ref).abs().max().item()
    assert err <= 2 * f32 + 1e-6 * ref.abs().max().item(), (err, f32)


@pytest.mark.parametrize("M,N,K,want", [
    (384, 288, 128, "gemm_fp32_raw_bn96_tma"),                 # unsplit, 96-wide tiles fill the waves better
    (384, 128, 1024, "gemm_fp32_raw_bn64_tma"),                # a short K: 128 x 64 tiles instead of split-K
    (272, 64, 1024, "gemm_fp32_raw_bm64_bn64_consumers1_tma"),   # under half a wave: 64 x 64, one consumer
], ids=["bn96", "bn64", "small64"])
def test_lowered_fp32_takes_launch_policy_tile(tmp_path, monkeypatch, M, N, K, want):
    monkeypatch.setattr(gemm_fp32, "SMS", 8)
    torch.manual_seed(M + N + K)
    a, b = torch.randn(M, K), torch.randn(K, N)
    pol = gemm_fp32.launch_policy(M, N, K)
    prog, src, out, ref = run_lowered(MM(), [a, b], tmp_path, want)
    gemms = [k for k in fuse_epilogues(prog.kernels, prog.buffers, prog.outputs)[0] if isinstance(k, Fp32GemmTemplate)]
    assert len(gemms) == 1 and gemms[0].ksplit == 1 and dict(gemms[0].tile) == pol
    assert re.findall(r"launch\((gemm_fp32\w*),", src) == [want]
    d = _defaults(src, want)
    assert d["BN"] == str(pol["BN"]) and d["TMA_ONLY"] == "1" and d["INSTR"] == f"tp.{pol['INSTR'].name}"
    assert d["BM"] == str(pol.get("BM", 128)) and d["CONSUMERS"] == str(pol.get("CONSUMERS", 2))
    assert "aligned16(x0.contiguous())" in src and "aligned16(x1.contiguous())" in src
    _check_fp32(out, ref, a @ b)


@pytest.mark.parametrize("M,N,K,why", [(384, 128, 512, "k16"), (384, 128, 1022, "split_a"), (384, 288, 126, "a96")])
def test_lowered_fp32_keeps_policy_where_narrow_tiles_lost(tmp_path, monkeypatch, M, N, K, why):
    """128 x 64 tiles in place of a split of fewer than LOWERED_BN64_MIN_K / 32 k-tiles, and any narrower tile
    where A is split by a pass first (K % 4 != 0), lost inside the lowered program: there `policy` stays."""
    from argus_agent.lower.ops_nn import LOWERED_BN64_MIN_K, fp32_tiling

    monkeypatch.setattr(gemm_fp32, "SMS", 8)
    assert gemm_fp32.launch_policy(M, N, K).get("BN") in (64, 96)
    assert (why == "k16") == (K < LOWERED_BN64_MIN_K and gemm_fp32.raw_ok(K))
    ks = gemm_fp32.policy(M, N, K).get("KSPLIT", 1)
    assert fp32_tiling(1, M, N, K) == (ks, ())
    torch.manual_seed(M + K)
    a, b = torch.randn(M, K), torch.randn(K, N)
    prog, src, out, ref = run_lowered(MM(), [a, b], tmp_path, f"keep_{why}")
    (g,) = [k for k in prog.kernels if isinstance(k, Fp32GemmTemplate)]
    assert g.tile == () and g.ksplit == ks and "_tma" not in src
    _check_fp32(out, ref, a @ b)


def test_lowered_fp32_keeps_split_k_for_long_k(tmp_path, monkeypatch):
    """Past NARROW_KT k-tiles the split stays (launch_policy = policy there): partial products and their sum."""
    monkeypatch.setattr(gemm_fp32, "SMS", 8)
    torch.manual_seed(3)
    a, b = torch.randn(384, 2048), torch.randn(2048, 128)
    prog, src, out, ref = run_lowered(MM(), [a, b], tmp_path, "long_k")
    gemms = [k for k in prog.kernels if isinstance(k, Fp32GemmTemplate)]
    assert len(gemms) == 1 and gemms[0].ksplit == gemm_fp32.launch_policy(384, 128, 2048)["KSPLIT"] > 1
    assert gemms[0].tile == () and re.findall(r"launch\((gemm_fp32\w*),", src) == ["gemm_fp32_raw"]
    assert "aligned16(x" not in src
    _check_fp32(out, ref, a @ b)


def test_model_tensor_as_a_keeps_the_fallback(tmp_path, monkeypatch):
    """A parameter read as A in place may start anywhere: its tile drops TMA_ONLY (the per-element copy stays)."""
    monkeypatch.setattr(gemm_fp32, "SMS", 8)
    torch.manual_seed(5)
    model, x = WeightFirst(384, 128), torch.randn(128, 288)     # 128 x 96 tiles (as bn96 above)
    prog, src, out, ref = run_lowered(model, [x], tmp_path, "weight_first")
    (g,) = [k for k in prog.kernels if isinstance(k, Fp32GemmTemplate)]
    assert g.a.kind == "param" and dict(g.tile) == {"BN": 96, "INSTR": gemm_fp32._N96}
    assert re.findall(r"launch\((gemm_fp32\w*),", src) == ["gemm_fp32_raw_bn96"]
    assert _defaults(src, "gemm_fp32_raw_bn96")["TMA_ONLY"] == "0"
    with torch.no_grad():
        _check_fp32(out, ref, model(x))


def test_misaligned_input_is_copied_aligned(tmp_path, monkeypatch):
    """An input view 4 bytes into its storage: the program binds an aligned copy, the result is the same."""
    monkeypatch.setattr(gemm_fp32, "SMS", 8)
    torch.manual_seed(7)
    base, b = torch.randn(384 * 128 + 1), torch.randn(128, 288)
    a = base[1:].view(384, 128)
    assert a.data_ptr() % 16 != 0
    prog, src, out, ref = run_lowered(MM(), [a, b], tmp_path, "misaligned")
    assert "gemm_fp32_raw_bn96_tma" in src
    _check_fp32(out, ref, a @ b)


@pytest.mark.parametrize("M,N,K,bn", [(384, 288, 128, 128), (384, 128, 1024, 64)], ids=["bn96_to_preset", "bn64"])
def test_fused_epilogue_takes_the_tile_its_loads_allow(tmp_path, monkeypatch, M, N, K, bn):
    """A fused epilogue (bias, relu) loads register tiles BN columns wide, a power of two: the 96-wide tile falls
    back to the preset's 128 (unsplit either way), the 64-wide one stays, both as the fused kernel's defaults."""
    monkeypatch.setattr(gemm_fp32, "SMS", 8)
    torch.manual_seed(M + K)
    model, x = nn.Sequential(nn.Linear(K, N), nn.ReLU()), torch.randn(M, K)
    prog, src, out, ref = run_lowered(model, [x], tmp_path, f"fused{bn}")
    (name,) = re.findall(r"launch\((gemm_fp32\w*),", src)
    assert name.startswith("gemm_fp32_e") and _defaults(src, name)["BN"] == str(bn)
    with torch.no_grad():
        _check_fp32(out, ref, model(x))


class Lin(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = nn.Linear(k, n)

    def forward(self, x):
        return torch.relu(self.fc(x))


@pytest.mark.parametrize("M,N,K,form", [(48, 320, 256, "linear"), (24, 256, 130, "mm"), (16, 256, 128, "linear"),
                                         (200, 96, 512, "mm")])
def test_skinny_fp32_lowers_to_swap_ab(tmp_path, M, N, K, form):
    """At most SWAP_ROWS rows of one product: gemm_fp32's swap-AB form (its own launch's): x's rows split by one
    pass, the weight read as it is ("nk": an nn.Linear's, K % 4 == 0; "kn": a (K, N) operand, N % 4 == 0, any K),
    C^T's tile stored transposed, split-K's partial products summed by the reduction (bias and ReLU there)."""
    from argus_agent.lower.ops_nn import fp32_swap

    torch.manual_seed(M + N + K)
    x = torch.randn(M, K)
    if form == "linear":
        model, inputs, layout = Lin(K, N), [x], "nk"
    else:
        model, inputs, layout = MM(), [x, torch.randn(K, N)], "kn"
    prog, src, out, ref = run_lowered(model, inputs, tmp_path, f"swap_{form}_{M}")
    (g,) = [k for k in fuse_epilogues(prog.kernels, prog.buffers, prog.outputs)[0] if isinstance(k, Fp32GemmTemplate)]
    want = fp32_swap(1, 1, M, N, K, layout, 3)
    assert g.swap == want and dict(want)["C_T"] == 1 and bool(dict(want).get("A_KN")) == (layout == "kn")
    assert g.epilogue is None and g.ksplit == dict(want).get("KSPLIT", 1)
    assert re.findall(r"launch\((gemm_fp32\w*),", src) == ["gemm_fp32_s0"]
    d = _defaults(src, "gemm_fp32_s0")
    assert d["C_T"] == "1" and d["A_RAW"] == "1" and d["BN"] == str(dict(want)["BN"])
    sig = src.split("def gemm_fp32_s0(", 1)[1][:400]
    assert 'C: tp.Tensor[tp.f32, "BC", "N", "M"]' in sig
    assert ('"BA", "KA", "M"' in sig) == (layout == "kn")
    assert not re.search(r"split_tf32(_t)?, \([^)]*\), b_(p_fc_weight|b)\b", src)   # the weight is never split
    with torch.no_grad():
        _check_fp32(out, ref, model(*inputs))


@pytest.mark.parametrize("M,N,K,form", [(300, 128, 64, "linear"), (48, 320, 258, "linear"), (24, 250, 128, "mm")],
                         ids=["rows", "nk_k_off_4", "kn_n_off_4"])
def test_fp32_without_swap_where_its_launch_does_not(tmp_path, M, N, K, form):
    torch.manual_seed(M + N + K)
    x = torch.randn(M, K)
    model, inputs = (Lin(K, N), [x]) if form == "linear" else (MM(), [x, torch.randn(K, N)])
    prog, src, out, ref = run_lowered(model, inputs, tmp_path, f"noswap_{form}_{M}_{K}")
    (g,) = [k for k in prog.kernels if isinstance(k, Fp32GemmTemplate)]
    assert g.swap == () and "gemm_fp32_s" not in src
    with torch.no_grad():
        _check_fp32(out, ref, model(*inputs))
