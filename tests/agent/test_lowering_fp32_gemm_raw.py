"""fp32 matmuls lowered for sm_90a read A as it is: the GEMM splits it into TF32 halves in registers (stdlib
gemm_fp32 A_RAW), so the program has no split pass over the activation (only the weights are split), and the
kernels it launches carry the RAW constexprs as their defaults. Run on the CPU interpreter against float64; a K
that is not a multiple of 4 keeps the split pass. (The GPU counterpart: tests/gpu/test_gpu_lower_fp32_raw.py.)"""

import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from argus_agent.lower.templates import Fp32GemmTemplate, fp32_gemm_raw, fuse_epilogues

from .lowered import assert_close, run_lowered


class Mlp(nn.Module):
    """ConvNeXt's pointwise MLP on channels-last rows: Linear -> GELU -> Linear, layer scale, residual."""

    def __init__(self, c, hidden):
        super().__init__()
        self.pw1, self.pw2 = nn.Linear(c, hidden), nn.Linear(hidden, c)
        self.gamma = nn.Parameter(torch.rand(c) + 0.5)

    def forward(self, x):
        return x + self.gamma * self.pw2(F.gelu(self.pw1(x)))


def _split_sources(src: str) -> list[str]:
    """The first argument of every split_tf32(_t) launch in the program (what is split)."""
    return re.findall(r"(?:launch|weight_split)\(split_tf32(?:_t)?, \([^)]*\), (\w+)", src)


def _launched_gemm_defaults(src: str) -> dict:
    """{GEMM kernel the program launches: its signature's text} (where the constexpr defaults are)."""
    out = {}
    for name in re.findall(r"launch\((gemm_fp32\w*),", src):
        sig = src.split(f"def {name}(", 1)[1]
        out[name] = sig[:sig.index('"""')]
    return out


@pytest.mark.parametrize("c,hidden", [(24, 96), (20, 36)])
def test_mlp_reads_its_activations_raw(tmp_path, c, hidden):
    torch.manual_seed(c)
    model, x = Mlp(c, hidden), torch.randn(3, 200, c)
    prog, src, out, ref = run_lowered(model, [x], tmp_path, f"mlp{c}")
    gemms = [k for k in fuse_epilogues(prog.kernels, prog.buffers, prog.outputs)[0]
             if isinstance(k, Fp32GemmTemplate)]
    assert len(gemms) == 2 and all(fp32_gemm_raw(g) for g in gemms)
    weights = {g.b.name for g in gemms}
    assert sorted(_split_sources(src)) == sorted(weights)      # the weights' split alone, no activation's
    sigs = _launched_gemm_defaults(src)
    assert len(sigs) == 2 and all("A_RAW: tp.constexpr = 1" in t and "STAGES: tp.constexpr = 4" in t
                                  for t in sigs.values()), sigs.keys()
    assert_close(out, ref, 1e-4)


def test_raw_kernels_default_to_what_they_launch(tmp_path):
    """gemm_fp32_raw(_<tile>) (unfused) and a fused gemm_fp32_e<n> both carry A_RAW=1 and RAW's stages as defaults: the
    agent's build gate compiles each kernel at its defaults, so it checks what runs."""
    import importlib.util

    from argus_agent.lower import lower_model, render_program
    from stdlib_kernels.gemm_fp32 import RAW

    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(64, 64), nn.Linear(64, 16, bias=False)

        def forward(self, x):
            return self.b(torch.relu(self.a(x)))     # a: fused epilogue (bias, relu); b: plain (the output)

    torch.manual_seed(1)
    model, x = Two(), torch.randn(300, 64)      # more than SWAP_ROWS rows (swap-AB reads the weight raw instead)
    p = tmp_path / "two.py"
    p.write_text(render_program(lower_model(model, [x], "sm_90a")))
    spec = importlib.util.spec_from_file_location("lowered_fp32_raw_two", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    names = [n for n in dir(mod) if n.startswith("gemm_fp32_")]
    assert any(n.startswith("gemm_fp32_raw") for n in names) and any(n.startswith("gemm_fp32_e") for n in names), names
    for n in names:
        d = getattr(mod, n).resolve_constexprs({})
        assert {k: d[k] for k in RAW} == RAW, n
    assert mod.gemm_fp32.resolve_constexprs({})["A_RAW"] == 0       # the module's own kernel: the split form
    with torch.no_grad():
        out, ref = mod.argus_forward(model, x), model.double()(x.double())
    assert_close(out, ref, 1e-4)


def test_unaligned_k_keeps_the_split_of_a(tmp_path):
    """K = 30: A's rows are not 16-byte multiples, so TMA cannot read A as it is; the split pass pads K."""
    torch.manual_seed(2)
    model = nn.Linear(30, 40)
    x = torch.randn(300, 30)
    prog, src, out, ref = run_lowered(model, [x], tmp_path, "k30")
    (g,) = [k for k in prog.kernels if isinstance(k, Fp32GemmTemplate)]
    assert not fp32_gemm_raw(g) and "gemm_fp32_raw" not in src
    assert len(_split_sources(src)) == 2 and x.shape[1] % 4
    assert_close(out, ref, 1e-4)
