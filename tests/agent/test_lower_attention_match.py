"""Attention written out (q @ k^T * s, a causal masked_fill, softmax, @ v) lowered to the stdlib attention kernels
on sm_90a (argus_agent/lower/attention_match.py): the chain becomes one AttentionTemplate with the right causal
flag and scale, and the lowered program, run on the CPU interpreter on fresh inputs, matches the model in float64
at its tolerance. Chains the kernels must not take (another mask, the probabilities used twice, a head dim the
kernel lacks) stay op by op and still match."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pytest
import torch

from argus_agent.lower.candidate import lower_problem
from argus_agent.lower.graph import capture_program
from argus_agent.problem import load_problem

from .test_lower_sdpa import _check, _templates

PROBLEM = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = {heads}
        self.register_buffer("mask", {mask})

    def forward(self, q, k, v):
        T = q.size(-2)
{body}


def get_inputs():
    return [torch.randn({b}, {heads}, {t}, {d}).to({dtype}) for _ in range(3)]


def get_init_inputs():
    return []
'''

MINGPT = """\
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        return F.softmax(att, dim=-1) @ v"""
TRIU = """\
        att = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(q.size(-1))
        att = torch.where(self.mask[:T, :T], float("-inf"), att)
        return torch.matmul(torch.softmax(att, dim=-1), v)"""
PLAIN = """\
        return torch.softmax(q @ k.transpose(-1, -2) * 0.2, dim=-1) @ v"""
TRIL = "torch.tril(torch.ones(40, 40)).view(1, 1, 40, 40)"
TRIU_MASK = "torch.ones(40, 40, dtype=torch.bool).triu(1)"


def _problem(tmp_path: Path, name: str, body: str, mask: str = TRIL, b=1, heads=2, t=33, d=32,
             dtype="torch.float32"):
    src = PROBLEM.format(heads=heads, mask=mask, body=body, b=b, t=t, d=d, dtype=dtype)
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(src))
    return load_problem(path, cpu=True)


@pytest.mark.parametrize("name,body,mask,causal,scale", [
    ("mingpt", MINGPT, TRIL, True, 1 / math.sqrt(32)),
    ("triu_where_div", TRIU, TRIU_MASK, True, 1 / math.sqrt(32)),
    ("plain_mul", PLAIN, TRIL, False, 0.2),
])
def test_written_out_attention_runs_attention_fp32(name, body, mask, causal, scale, tmp_path):
    problem = _problem(tmp_path, name, body, mask)
    first = lower_problem(problem, target="sm_90a")
    (t,) = _templates(first)
    assert t.kernel == "attention_fp32" and t.causal is causal and t.scale == pytest.approx(scale, rel=1e-12)
    assert (t.bh, t.sq, t.skv, t.d) == (2, 33, 33, 32)
    assert "bmm" not in first.source and "_softmax" not in first.source
    assert first.tol < 1e-3
    _check(problem, first, tmp_path, name, rel=1e-5)


def test_bf16_written_out_attention_is_the_forward_kernel(tmp_path):
    problem = _problem(tmp_path, "bf16", MINGPT, d=64, dtype="torch.bfloat16")
    first = lower_problem(problem, target="sm_90a")
    (t,) = _templates(first)
    assert t.kernel != "attention_fp32" and t.causal and t.out.dtype == torch.bfloat16
    assert t.scale == pytest.approx(1 / 8)


@pytest.mark.parametrize("name,body,mask,d", [
    # a mask that is not causal: key j hidden where j > i + 1
    ("shifted_mask", MINGPT, "torch.tril(torch.ones(40, 40), diagonal=1).view(1, 1, 40, 40)", 32),
    # the probabilities returned beside the output: the chain stays op by op
    ("probs_used", MINGPT.replace("return F.softmax(att, dim=-1) @ v", "p = F.softmax(att, dim=-1)\n"
                                  "        return p @ v, p"), TRIL, 32),
    ("head_dim_48", MINGPT, TRIL, 48),     # the fp32 kernel takes head dims 32, 64 and 128
    ("negative_scale", PLAIN.replace("0.2", "-0.2"), TRIL, 32),
])
def test_what_the_kernels_do_not_take_stays_op_by_op(name, body, mask, d, tmp_path):
    problem = _problem(tmp_path, name, body, mask, t=9, d=d)
    first = lower_problem(problem, target="sm_90a")
    assert not _templates(first)
    if name != "probs_used":
        _check(problem, first, tmp_path, name)


def test_cpu_target_is_unchanged(tmp_path):
    problem = _problem(tmp_path, "cpu", MINGPT, t=9)
    first = lower_problem(problem, target="cpu")
    assert not _templates(first)
    _check(problem, first, tmp_path, "cpu")


def test_the_match_reads_the_causal_chain_of_the_capture(tmp_path):
    """The matcher sees the core-ATen chain it documents (bmm, mul, where on the buffer's mask, _softmax, bmm)."""
    from argus_agent.lower import attention_match

    problem = _problem(tmp_path, "cap", MINGPT, t=9)
    cap = capture_program(problem.make_model(), list(problem.base_inputs))
    found = attention_match.find(cap, "sm_90a")
    (m,) = found.values()
    ops = {str(n.target) for n in m.live}
    assert {"aten.bmm.default", "aten._softmax.default", "aten.where.self", "aten.mul.Tensor"} <= ops
    assert m.causal and [n.name for n in (m.q, m.k, m.v)] == ["q", "k", "v"]
