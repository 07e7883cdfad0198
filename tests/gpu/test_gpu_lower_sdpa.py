"""A PyTorch program's scaled_dot_product_attention, lowered for sm_90a, runs the stdlib attention kernels on the
GPU at a real size (bf16, B=4, H=16, S=2048, D=128, causal and not; split-KV decoding of one new token against
GQA caches of 8192-33000 keys: one split stored directly, splits merged at once, 66 splits merged by loops) and
matches float64 torch on fresh inputs, within 2x of torch's own bf16 SDPA error.
Skips without a GPU."""

from __future__ import annotations

import importlib.util

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")


class SDPA(torch.nn.Module):
    def __init__(self, causal: bool, gqa: bool):
        super().__init__()
        self.causal, self.gqa = causal, gqa

    def forward(self, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=self.causal,
                                                                enable_gqa=self.gqa)


def rel(x, ref):
    x = x.double()
    assert torch.isfinite(x).all(), "non-finite or unwritten output"
    return float((x - ref).norm() / ref.norm())


@pytest.mark.parametrize("b,h,hkv,sq,skv,d,causal,kernel", [
    (4, 16, 16, 2048, 2048, 128, False, "attention_fwd"),
    (4, 16, 16, 2048, 2048, 128, True, "attention_fwd"),
    (8, 8, 4, 500, 500, 64, True, "attention_fwd"),               # short: PAIRED (two row blocks a block)
    (4, 32, 8, 1, 8192, 128, False, "attention_decode"),       # 4 splits, merged at once
    (16, 32, 8, 1, 8192, 128, False, "attention_decode_bf16"),  # 128 KV heads fill the SMs: one split, no merge
    (8, 32, 8, 1, 16384, 64, False, "attention_decode"),       # d 64, 2 splits
    (1, 8, 2, 1, 33000, 64, False, "attention_decode"),        # 258 key tiles on 2 KV heads: 66 splits, the loops
])
def test_lowered_sdpa_matches_float64_on_gpu(b, h, hkv, sq, skv, d, causal, kernel, tmp_path):
    from argus_agent.lower import lower_model, render_program

    model = SDPA(causal, h != hkv)
    shapes = [(b, h, sq, d), (b, hkv, skv, d), (b, hkv, skv, d)]
    example = [torch.empty(s, dtype=torch.bfloat16) for s in shapes]
    src = render_program(lower_model(model, example, "sm_90a"))
    assert f"launch({kernel}," in src and "bmm" not in src
    p = tmp_path / f"sdpa_{kernel}_{int(causal)}.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(p.stem, p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    g = torch.Generator(device=DEV).manual_seed(sq + skv + causal)
    q, k, v = (torch.randn(s, device=DEV, generator=g).bfloat16() for s in shapes)
    with torch.no_grad():
        out = mod.argus_forward(model, q, k, v)
        torch.cuda.synchronize()
        ref = model(q.double(), k.double(), v.double())   # the math backend in float64
        mine = model(q, k, v)                             # torch's own bf16 attention
    assert out.shape == ref.shape and out.dtype == torch.bfloat16
    err = rel(out, ref)
    assert err < 5e-3, err
    assert err < 2 * rel(mine, ref) + 1e-3, (err, rel(mine, ref))


def test_lowered_sdpa_takes_an_input_at_an_odd_address(tmp_path):
    """A contiguous query that starts 2 bytes into its storage cannot be described by a tensor map; the host
    program copies it aligned rather than letting the TMA-only attention kernel refuse it."""
    from argus_agent.lower import lower_model, render_program

    b, h, s, d = 2, 8, 1024, 64
    model = SDPA(False, False)
    example = [torch.empty((b, h, s, d), dtype=torch.bfloat16) for _ in range(3)]
    src = render_program(lower_model(model, example, "sm_90a"))
    assert "launch(attention_fwd," in src and "aligned16(" in src
    p = tmp_path / "sdpa_odd.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(p.stem, p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    g = torch.Generator(device=DEV).manual_seed(7)
    store = torch.randn(b * h * s * d + 1, device=DEV, generator=g).bfloat16()
    q = store[1:].view(b, h, s, d)                        # contiguous, 2 bytes off 16-byte alignment
    assert q.is_contiguous() and q.data_ptr() % 16 == 2
    k, v = (torch.randn((b, h, s, d), device=DEV, generator=g).bfloat16() for _ in range(2))
    with torch.no_grad():
        out = mod.argus_forward(model, q, k, v)
        torch.cuda.synchronize()
        ref = model(q.double(), k.double(), v.double())
        mine = model(q, k, v)
    err = rel(out, ref)
    assert err < 2 * rel(mine, ref) + 1e-3, (err, rel(mine, ref))
