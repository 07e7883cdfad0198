"""minGPT's attention written out (q @ k^T * s, masked_fill with a causal buffer, softmax, @ v), lowered for
sm_90a: the chain runs as the stdlib attention kernels (attention_fp32 for fp32, attention_fwd for bf16) at a real
size, and matches float64 torch on fresh inputs within 2x of eager's own error (fp32: eager's fp32 matmuls; bf16:
eager's bf16 chain). Skips without a GPU."""

from __future__ import annotations

import importlib.util
import math

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")


class WrittenOut(torch.nn.Module):
    def __init__(self, max_len: int):
        super().__init__()
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len)).view(1, 1, max_len, max_len))

    def forward(self, q, k, v):
        t = q.size(-2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        return torch.nn.functional.softmax(att, dim=-1) @ v


def rel(x, ref):
    x = x.double()
    assert torch.isfinite(x).all(), "non-finite or unwritten output"
    return float((x - ref).norm() / ref.norm())


@pytest.mark.parametrize("b,h,t,d,dtype,kernel", [
    (8, 12, 512, 64, torch.float32, "attention_fp32"),
    (4, 8, 1000, 128, torch.float32, "attention_fp32"),
    (8, 12, 1024, 64, torch.bfloat16, "attention_fwd"),
])
def test_written_out_attention_runs_the_kernels_on_gpu(b, h, t, d, dtype, kernel, tmp_path):
    from argus_agent.lower import lower_model, render_program

    model = WrittenOut(1024).to(DEV)
    shapes = [(b, h, t, d)] * 3
    src = render_program(lower_model(model.cpu(), [torch.empty(s, dtype=dtype) for s in shapes], "sm_90a"))
    model = model.to(DEV)
    assert f"launch({kernel}," in src and "bmm" not in src
    p = tmp_path / f"attn_match_{kernel}_{t}.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(p.stem, p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    g = torch.Generator(device=DEV).manual_seed(t + d)
    q, k, v = (torch.randn(s, device=DEV, generator=g).to(dtype) for s in shapes)
    with torch.no_grad():
        out = mod.argus_forward(model, q, k, v)
        torch.cuda.synchronize()
        ref = model.double()(q.double(), k.double(), v.double())
        model = model.to(dtype)
        mine = model(q, k, v)
    assert out.shape == ref.shape and out.dtype == dtype
    err = rel(out, ref)
    assert err < 2 * rel(mine, ref) + (1e-6 if dtype == torch.float32 else 1e-3), (err, rel(mine, ref))
