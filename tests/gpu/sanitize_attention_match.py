"""compute-sanitizer target: minGPT's written-out attention lowered for sm_90a (attention_match.py) once in fp32
(attention_fp32 after the TF32 splits) and once in bf16 (attention_fwd), at small sizes. Prints ok and the max
error against eager."""

import importlib.util
import math
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from argus_agent.lower import lower_model, render_program  # noqa: E402


class WrittenOut(torch.nn.Module):
    def __init__(self, max_len: int):
        super().__init__()
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len)).view(1, 1, max_len, max_len))

    def forward(self, q, k, v):
        t = q.size(-2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        return torch.nn.functional.softmax(att, dim=-1) @ v


for dtype, shape in ((torch.float32, (2, 3, 100, 64)), (torch.bfloat16, (2, 3, 130, 64))):
    model = WrittenOut(256).to(dtype)
    xs = [torch.randn(shape).to(dtype) for _ in range(3)]
    src = render_program(lower_model(model, xs, "sm_90a"))
    assert "bmm" not in src
    p = os.path.join(tempfile.mkdtemp(), f"attn_match_{str(dtype)[6:]}.py")
    with open(p, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(os.path.basename(p)[:-3], p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model, xs = model.cuda(), [x.cuda() for x in xs]
    with torch.no_grad():
        out = mod.argus_forward(model, *xs)
        torch.cuda.synchronize()
        print("ok", dtype, float((out.double() - model(*xs).double()).abs().max()))
