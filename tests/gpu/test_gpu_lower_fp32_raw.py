"""Lowered fp32 MLPs (ConvNeXt's Linear -> GELU -> Linear, layer scale, residual) on a real GPU: the program
reads the activations as they are (stdlib gemm_fp32 A_RAW: A split in the GEMM's registers, only the weights
split), and its error against float64 is no worse than eager fp32's (cuBLAS SGEMM, TF32 off) on the same
inputs, in the same measures. Skips without a GPU."""

from __future__ import annotations

import importlib.util
import re

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

from argus_agent.lower import lower_model, render_program  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")


class Mlp(torch.nn.Module):
    def __init__(self, c, hidden):
        super().__init__()
        self.pw1, self.pw2 = torch.nn.Linear(c, hidden), torch.nn.Linear(hidden, c)
        self.gamma = torch.nn.Parameter(torch.rand(c) + 0.5)

    def forward(self, x):
        return x + self.gamma * self.pw2(torch.nn.functional.gelu(self.pw1(x)))


@pytest.mark.parametrize("rows,c,hidden", [(4 * 28 * 28, 96, 384), (3000, 64, 1000)])
def test_lowered_mlp_reads_activations_raw(tmp_path, rows, c, hidden):
    torch.manual_seed(rows + c)
    model, x = Mlp(c, hidden), torch.randn(rows, c)
    src = render_program(lower_model(model, [x], "sm_90a"))
    splits = re.findall(r"(?:launch|weight_split)\(split_tf32(?:_t)?, \([^)]*\), (\w+)", src)
    assert len(splits) == 2 and all("weight" in s for s in splits), splits     # the two weights, no activation
    p = tmp_path / f"mlp_{rows}.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(f"gpu_lowered_mlp_raw_{rows}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        ref = model.double()(x.double())
        m32 = model.float().to(DEV)
        out = mod.argus_forward(m32, x.to(DEV)).cpu().double()
        tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            eager = m32(x.to(DEV)).cpu().double()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = tf32
    assert torch.isfinite(out).all()
    fro, e_fro = (((y - ref).norm() / ref.norm()).item() for y in (out, eager))
    err, e_err = (((y - ref).abs() / (ref.abs() + 1)).max().item() for y in (out, eager))
    assert fro <= 1.25 * e_fro and err <= 2 * e_err, (fro, e_fro, err, e_err)
