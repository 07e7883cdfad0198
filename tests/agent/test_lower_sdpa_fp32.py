"""fp32 scaled_dot_product_attention on sm_90a: the lowering runs stdlib attention_fp32 (split TF32 on the
tensor cores, fp32-accurate) after the TF32 split launches, instead of torch's bmm/softmax/bmm decomposition;
head dims 32/64/128, causal, GQA, ragged lengths. Every lowered program runs here on the CPU interpreter
against float64 torch on fresh inputs, at the fp32 tolerance; what falls back says why; the candidate's
kernels carry the launch's constexprs and pass the verifier gate."""

from __future__ import annotations

import logging

import pytest
import torch

from argus_agent.lower import lower_model, render_program
from argus_agent.lower.candidate import lower_problem
from argus_agent.lower.ops_attention import AttentionTemplate, fwd_params, kernel_plan
from stdlib_kernels import attention_fp32

from .test_lower_sdpa import _check, _load, _problem, _templates

CASES = {   # name: (shapes, call)
    "causal_d64": ([(1, 2, 70, 64)] * 3, "q, k, v, is_causal=True"),
    "gqa_d32_cross": ([(1, 4, 50, 32), (1, 2, 77, 32), (1, 2, 77, 32)], "q, k, v, enable_gqa=True"),
    "d128_scale": ([(2, 1, 40, 128), (2, 1, 90, 128), (2, 1, 90, 128)], "q, k, v, scale=0.3"),
    "causal_few_keys_d32": ([(1, 2, 45, 32), (1, 2, 30, 32), (1, 2, 30, 32)], "q, k, v, is_causal=True"),
    "short_queries_d64": ([(1, 2, 3, 64), (1, 2, 130, 64), (1, 2, 130, 64)], "q, k, v"),   # no fp32 decode
}


@pytest.mark.parametrize("name", list(CASES))
def test_sm90a_runs_attention_fp32(name, tmp_path):
    shapes, call = CASES[name]
    problem = _problem(tmp_path, name, shapes, call, "torch.float32")
    first = lower_problem(problem, target="sm_90a")
    (t,) = _templates(first)
    assert t.kernel == "attention_fp32" and t.out.dtype == torch.float32 and not t.splits
    assert len(first.program.kernels) == 1        # the kernel writes the output itself
    q, k = shapes[0], shapes[1]
    bh, bhkv, sq, skv, d = q[0] * q[1], k[0] * k[1], q[2], k[2], q[3]
    assert (t.bh, t.bhkv, t.sq, t.skv, t.d) == (bh, bhkv, sq, skv, d)
    src = first.source
    skvp = -(-skv // 4) * 4
    assert "def attention_fp32(" in src and "def split_tf32(" in src and "def split_tf32_t(" in src
    assert "def attention_fwd(" not in src
    lines = [x.strip() for x in src.splitlines() if x.strip().startswith("launch(")]
    assert [x.split(",")[0] for x in lines] == ["launch(split_tf32", "launch(split_tf32", "launch(split_tf32_t",
                                                "launch(attention_fp32"]
    assert f".view({bhkv}, {d}, {skvp})" in lines[-1] and f"GROUP={bh // bhkv}" in lines[-1]
    # the candidate's kernel defaults are the launch's constexprs (the build gate checks what runs)
    from argus_agent.codemod_base import constexpr_params, kernels, parse_source
    defaults = {fn.name.value: constexpr_params(fn) for fn in kernels(parse_source(src))}
    launched = fwd_params(t)
    assert launched == {**attention_fp32.policy(d, sq, t.causal), "GROUP": bh // bhkv}
    assert {key: defaults["attention_fp32"][key] for key in launched} == {key: repr(v) for key, v in launched.items()}
    assert first.tol < 1e-3                        # matched at fp32 accuracy, never bf16's 1e-2
    _check(problem, first, tmp_path, name, rel=1e-5)


@pytest.mark.parametrize("shapes,call,why", [
    ([(1, 2, 33, 48)] * 3, "q, k, v", "the fp32 kernel takes 32, 64 or 128"),
    ([(1, 2, 33, 64)] * 3 + ["torch.rand(33, 33) < 0.5"], "q, k, v, attn_mask=m", "attn_mask is given"),
])
def test_what_the_fp32_kernel_does_not_take_decomposes_with_a_reason(shapes, call, why, tmp_path, caplog):
    args = "q, k, v, m" if "attn_mask" in call else "q, k, v"
    problem = _problem(tmp_path, "fb", shapes, call, "torch.float32", args=args)
    with caplog.at_level(logging.INFO, logger="argus_agent.lower"):
        first = lower_problem(problem, target="sm_90a")
    assert not _templates(first) and "attention_fp32" not in first.source
    assert why in caplog.text and "decomposed" in caplog.text and "fb.py:" in caplog.text
    _check(problem, first, tmp_path, "fb")


def test_kernel_plan_takes_fp32():
    class T:
        def __init__(self, *shape, dtype=torch.float32):
            self.shape, self.dtype = shape, dtype

    q, kv = T(2, 8, 256, 64), T(2, 2, 256, 64)
    assert kernel_plan("sm_90a", q, q, q, None, 0.0, True, None, False) == ("fp32", 1)
    assert kernel_plan("sm_90a", q, kv, kv, None, 0.0, False, None, True) == ("fp32", 4)
    assert kernel_plan("sm_90a", T(2, 8, 4, 32), kv, kv, None, 0.0, False, None, True)[0] is None   # head dims
    assert kernel_plan("sm_90a", T(2, 8, 4, 32), T(2, 2, 9, 32), T(2, 2, 9, 32), None, 0.0, False, None,
                       True) == ("fp32", 4)
    plan, why = kernel_plan("sm_90a", q, T(2, 8, 256, 64, dtype=torch.bfloat16), q, None, 0.0, False, None, False)
    assert plan is None and "bfloat16/float32" in why          # mixed dtypes: decomposed
    plan, why = kernel_plan("sm_90a", T(2, 8, 256, 64, dtype=torch.float16), T(2, 8, 256, 64, dtype=torch.float16),
                            T(2, 8, 256, 64, dtype=torch.float16), None, 0.0, False, None, False)
    assert plan is None and "float16" in why
    assert kernel_plan("cpu", q, q, q, None, 0.0, False, None, False)[0] is None


def test_rendered_fp32_kernels_verify_clean(tmp_path):
    """The candidate's copy of attention_fp32 (and the split kernels) pass tilepy-verify as the gate runs it."""
    import tilepy as tp
    from argus_agent.gates import verify_kernels

    shapes, call = CASES["causal_d64"]
    first = lower_problem(_problem(tmp_path, "verify", shapes, call, "torch.float32"), target="sm_90a")
    mod = _load(first.source, tmp_path, "verify32")
    kernels = {k: v for k, v in vars(mod).items() if isinstance(v, tp.Kernel)}
    assert {"attention_fp32", "split_tf32", "split_tf32_t"} <= set(kernels)
    verdict = verify_kernels({"attention_fp32": kernels["attention_fp32"]}, "sm_90a")
    assert verdict.ok, [f["message"] for f in verdict.findings if f["severity"] == "error"]


def test_real_size_source_carries_the_launch_constexprs():
    """Rendering only (the GPU suite runs this size): level1/132's shape."""
    from argus_agent.codemod_base import constexpr_params, kernels, parse_source

    class Sdpa(torch.nn.Module):
        def forward(self, q, k, v):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    prog = lower_model(Sdpa(), [torch.empty(8, 16, 2048, 64)] * 3, "sm_90a")
    src = render_program(prog)
    (t,) = [k for k in prog.kernels if isinstance(k, AttentionTemplate)]
    defaults = {fn.name.value: constexpr_params(fn) for fn in kernels(parse_source(src))}
    assert {k: defaults["attention_fp32"][k] for k in fwd_params(t)} == {k: repr(v) for k, v in fwd_params(t).items()}
    assert "launch(attention_fp32, (16, 128)," in src
