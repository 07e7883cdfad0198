"""Every stdlib template the lowering embeds in a GPU candidate passes the candidate policy (argus_agent.policy):
the agent refuses a module that reaches names by string (`getattr`), dunders or private attributes, so a template
that does would make every such problem's first candidate "forbidden" on the GPU (gemm_fp32's register-A
instruction lookup did, 2026-11-24: level2/056 and 007 in the GPU agent loop). Lowered for sm_90a on the CPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from argus_agent.lower import lower_model, render_program
from argus_agent.policy import check_source


class Fn(nn.Module):
    def __init__(self, fn, *mods):
        super().__init__()
        self.fn = fn
        self.mods = nn.ModuleList(mods)

    def forward(self, *xs):
        return self.fn(self.mods, *xs)


CASES = {
    "fp32_linear": (lambda: Fn(lambda m, x: torch.relu(m[0](x)) / 2, nn.Linear(512, 256)),
                    lambda: [torch.randn(256, 512)]),
    "bf16_decode_linear": (lambda: Fn(lambda m, x: m[0](x), nn.Linear(1024, 2048).bfloat16()),
                           lambda: [torch.randn(16, 1024).bfloat16()]),
    "bf16_matmul": (lambda: Fn(lambda m, a, b: a @ b), lambda: [torch.randn(1024, 1024).bfloat16(),
                                                                 torch.randn(1024, 2048).bfloat16()]),
    "conv2d": (lambda: Fn(lambda m, x: torch.relu(m[0](x)), nn.Conv2d(32, 64, 3, padding=1)),
               lambda: [torch.randn(2, 32, 28, 28)]),
    "depthwise7": (lambda: Fn(lambda m, x: m[0](x), nn.Conv2d(16, 16, 7, padding=3, groups=16)),
                   lambda: [torch.randn(2, 16, 40, 40)]),
    "lstm": (lambda: Fn(lambda m, x: m[0](x)[0], nn.LSTM(32, 48)), lambda: [torch.randn(6, 3, 32)]),
    "sdpa_bf16": (lambda: Fn(lambda m, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
                  lambda: [torch.randn(2, 4, 256, 64).bfloat16() for _ in range(3)]),
    "sdpa_fp32": (lambda: Fn(lambda m, q, k, v: F.scaled_dot_product_attention(q, k, v)),
                  lambda: [torch.randn(2, 4, 256, 64) for _ in range(3)]),
    "topk": (lambda: Fn(lambda m, x: torch.topk(x, 8, dim=-1).values), lambda: [torch.randn(64, 1000)]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_lowered_gpu_candidate_passes_the_policy(case):
    make, inputs = CASES[case]
    torch.manual_seed(0)
    src = render_program(lower_model(make().eval(), inputs(), "sm_90a"))
    assert check_source(src, f"{case}.py") == ""
