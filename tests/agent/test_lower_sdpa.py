"""scaled_dot_product_attention through the lowering: capture keeps it one node; on sm_90a a bf16 call with head
dim 64/128, no mask and no dropout runs the stdlib attention kernels (forward, or split-KV decode for a few
queries), anything else is decomposed by torch's table into bmm/softmax/bmm with the reason logged. Every
lowered program runs here (the CPU interpreter runs the sm_90a kernels too) against float64 torch on fresh
inputs."""

from __future__ import annotations

import importlib.util
import logging
import textwrap
from pathlib import Path

import pytest
import torch

from argus_agent.lower import lower_model, render_program
from argus_agent.lower.candidate import lower_problem
from argus_agent.lower.graph import capture_program
from argus_agent.lower.ops_attention import AttentionTemplate, decode_params, fwd_params, kernel_plan
from argus_agent.problem import load_problem
from stdlib_kernels import attention

SDPA = "aten.scaled_dot_product_attention.default"

PROBLEM = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, {args}):
        return F.scaled_dot_product_attention({call})


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
'''


def _problem(tmp_path: Path, name: str, shapes: list, call: str, dtype="torch.float32", init="        pass",
             args="q, k, v"):
    inputs = ", ".join(f"torch.randn{tuple(s)}.to({dtype})" if not isinstance(s, str) else s for s in shapes)
    src = PROBLEM.format(init=init, args=args, call=call, inputs=inputs)
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(src))
    return load_problem(path, cpu=True)


def _load(source: str, tmp_path: Path, name: str):
    p = tmp_path / f"lowered_{name}.py"
    p.write_text(source)
    spec = importlib.util.spec_from_file_location(f"lowered_sdpa_{name}_{abs(hash(source))}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _check(problem, first, tmp_path, name, seed=5, rel=None):
    """Run the candidate on fresh inputs against the model in float64; returns the relative error."""
    mod = _load(first.source, tmp_path, name)
    model = problem.make_model()
    gen = torch.Generator().manual_seed(seed)
    inputs = problem.draw_inputs(problem.shapes(1)[0], gen)
    with torch.no_grad():
        out = mod.argus_forward(model, *inputs)
        ref = model.double()(*[x.double() if x.is_floating_point() else x for x in inputs])
    assert out.shape == ref.shape and out.dtype == inputs[0].dtype
    assert torch.isfinite(out).all()
    o = out.double()
    assert torch.allclose(o, ref, atol=first.tol, rtol=first.tol), (
        f"max error {(o - ref).abs().max():.3g} at tolerance {first.tol}")
    err = float((o - ref).norm() / ref.norm())
    if rel is not None:
        assert err < rel, err
    return err


def _templates(first):
    return [k for k in first.program.kernels if isinstance(k, AttentionTemplate)]


# ------------------------------------------------------------------------------------------------- capture
@pytest.mark.parametrize("call,shapes", [
    ("q, k, v", [(2, 3, 9, 8)] * 3),
    ("q, k, v, is_causal=True", [(2, 3, 9, 8)] * 3),
    ("q, k, v, enable_gqa=True", [(2, 4, 9, 8), (2, 2, 9, 8), (2, 2, 9, 8)]),
    ("q, k, v, attn_mask=m, scale=0.5", [(2, 3, 9, 8), (2, 3, 11, 8), (2, 3, 11, 8), (9, 11)]),
], ids=["plain", "causal", "gqa", "mask_scale"])
def test_capture_keeps_one_sdpa_node(call, shapes, tmp_path):
    args = "q, k, v, m" if "attn_mask" in call else "q, k, v"
    problem = _problem(tmp_path, "cap", shapes, call, args=args)
    cap = capture_program(problem.make_model(), list(problem.base_inputs))
    ops = [str(n.target) for n in cap.program.graph.nodes if n.op == "call_function"]
    assert ops == [SDPA], ops                       # no bmm/_softmax: the node is whole
    node = next(n for n in cap.program.graph.nodes if n.op == "call_function")
    if "is_causal" in call:
        assert node.args[5] is True
    if "gqa" in call:
        assert node.kwargs.get("enable_gqa") is True
    if "scale" in call:
        assert node.kwargs.get("scale") == 0.5


def test_other_ops_still_decompose_to_core_aten():
    """Only SDPA is kept: a softmax and a Linear around it are core-ATen ops as before."""
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(8, 8)

        def forward(self, q, k, v):
            return torch.softmax(self.proj(torch.nn.functional.scaled_dot_product_attention(q, k, v)), -1)

    x = torch.randn(1, 2, 5, 8)
    ops = [str(n.target) for n in capture_program(Block(), [x, x, x]).program.graph.nodes if n.op == "call_function"]
    assert SDPA in ops and "aten._softmax.default" in ops and "aten.linear.default" not in ops
    assert any(op.startswith(("aten.addmm", "aten.mm")) for op in ops)


# ------------------------------------------------------------------------------------- the CPU target
CPU_CASES = {   # name: (shapes, call, dtype)
    "fp32": ([(2, 3, 17, 8)] * 3, "q, k, v", "torch.float32"),
    "fp32_causal_cross": ([(2, 3, 19, 8), (2, 3, 7, 8), (2, 3, 7, 8)], "q, k, v, is_causal=True", "torch.float32"),
    "fp32_gqa_scale": ([(1, 4, 13, 16), (1, 2, 21, 16), (1, 2, 21, 16)], "q, k, v, scale=0.2, enable_gqa=True",
                       "torch.float32"),
    "bf16_causal": ([(2, 2, 15, 64)] * 3, "q, k, v, is_causal=True", "torch.bfloat16"),
}


@pytest.mark.parametrize("name", list(CPU_CASES))
def test_cpu_target_decomposes_and_matches_float64(name, tmp_path, caplog):
    shapes, call, dtype = CPU_CASES[name]
    problem = _problem(tmp_path, name, shapes, call, dtype)
    with caplog.at_level(logging.INFO, logger="argus_agent.lower"):
        first = lower_problem(problem, target="cpu")
    assert not _templates(first)
    assert "target cpu has no attention kernel" in caplog.text
    assert first.tol == (1e-2 if "bf16" in name else pytest.approx(1e-4))
    _check(problem, first, tmp_path, name)


def test_masks_decompose_with_the_same_math(tmp_path):
    """A boolean mask input and a float mask buffer: torch's masked softmax, matched in float64."""
    init = "        self.register_buffer('bias', torch.randn(9, 12))"
    problem = _problem(tmp_path, "masks", [(2, 2, 9, 8), (2, 2, 12, 8), (2, 2, 12, 8), "torch.rand(9, 12) < 0.7"],
                       "q, k, v, attn_mask=m) + F.scaled_dot_product_attention(q, k, v, attn_mask=self.bias",
                       init=init, args="q, k, v, m")
    first = lower_problem(problem, target="sm_90a")
    assert not _templates(first)
    _check(problem, first, tmp_path, "masks")


# ------------------------------------------------------------------------------ sm_90a: the stdlib kernels
SM90_CASES = {   # name: (shapes, call, expected kernel)
    "causal_d64": ([(1, 2, 70, 64)] * 3, "q, k, v, is_causal=True", "attention_fwd"),
    "gqa_d64": ([(1, 4, 100, 64), (1, 2, 130, 64), (1, 2, 130, 64)], "q, k, v, enable_gqa=True", "attention_fwd"),
    "cross_gqa_d128": ([(1, 4, 40, 128), (1, 2, 150, 128), (1, 2, 150, 128)], "q, k, v, enable_gqa=True",
                       "attention_fwd"),
    "decode_gqa": ([(2, 4, 3, 64), (2, 1, 300, 64), (2, 1, 300, 64)], "q, k, v, enable_gqa=True", "attention_decode"),
    # one key tile: one split, whose kernel stores the bf16 output and the LSE itself (no partials, no merge)
    "decode_one_split": ([(1, 4, 2, 64), (1, 2, 100, 64), (1, 2, 100, 64)], "q, k, v, enable_gqa=True",
                         "attention_decode_bf16"),
    # 10 key tiles on 1 KV head: 10 splits, more than the merge loads at once (its run-time loops)
    "decode_many_splits": ([(1, 2, 1, 128), (1, 1, 1240, 128), (1, 1, 1240, 128)], "q, k, v, enable_gqa=True",
                           "attention_decode"),
    # top-left causal with few queries: the forward kernel (the decode kernel's causal mask is bottom-right)
    "causal_short_queries": ([(1, 2, 5, 64), (1, 2, 90, 64), (1, 2, 90, 64)], "q, k, v, is_causal=True",
                             "attention_fwd"),
}


@pytest.mark.parametrize("name", list(SM90_CASES))
def test_sm90a_runs_the_stdlib_attention_kernel(name, tmp_path):
    shapes, call, kernel = SM90_CASES[name]
    problem = _problem(tmp_path, name, shapes, call, "torch.bfloat16")
    first = lower_problem(problem, target="sm_90a")
    (t,) = _templates(first)
    assert len(first.program.kernels) == 1     # the kernel writes the output itself: no copy after it
    assert first.kind == "attention"           # (the knowledge base's GEMM skills do not apply to it)
    q, k = shapes[0], shapes[1]
    bh, bhkv, sq, skv, d = q[0] * q[1], k[0] * k[1], q[2], k[2], q[3]
    assert (t.bh, t.bhkv, t.sq, t.skv, t.d) == (bh, bhkv, sq, skv, d)
    assert t.causal == ("is_causal" in call)
    # no matmul or softmax of the decomposition is left: the kernels read the inputs in place
    assert all(isinstance(k, AttentionTemplate) or not getattr(k, "extra", {}).get("matmul")
               for k in first.program.kernels)
    src = first.source
    assert f"def {kernel}(" in src and f"launch({kernel}," in src
    if kernel == "attention_fwd":
        assert f".view({bh}, {sq}, {d})" in src and f".view({bhkv}, {skv}, {d})" in src
        assert f"CAUSAL={t.causal}" in src and f"GROUP={bh // bhkv}" in src
        for key, val in attention.policy(d, sq, t.causal).items():    # the stdlib's tuned constexprs
            assert f"{key}={val!r}" in src
        assert "def attention_decode(" not in src      # only the kernels it launches (each is built and gated)
    elif kernel == "attention_decode_bf16":
        assert t.splits == 1 and t.parts is None and t.lse_parts is None
        assert "def attention_merge(" not in src and "launch(attention_merge," not in src
        assert "def attention_decode(" not in src and "def attention_fwd(" not in src
        assert f"{t.out.name}.view(1, {bhkv}, {bh // bhkv * sq}, {d})" in src   # the result, written in place
        assert 'OP: tp.Tensor[tp.bf16, "NS", "BHKV", "M", "D"]' in src
    else:
        assert "launch(attention_merge," in src and f".view({bhkv}, {bh // bhkv * sq}, {d})" in src
        assert "def attention_fwd(" not in src and "attention_decode_bf16" not in src
        # the merge as the stdlib's `decode` launches it: every split at once up to 8 splits, else its loops
        mp = attention.merge_params(t.splits, bh // bhkv * sq, d)
        assert t.splits == attention.decode_splits(bhkv, bh // bhkv * sq, skv, d) and t.splits > 1
        assert (mp["SPLITS"] > 0) == (t.splits <= 8)
        merge = next(line for line in src.splitlines() if "launch(attention_merge," in line)
        assert all(f"{key}={val!r}" in merge for key, val in mp.items()), (merge, mp)
        assert f"({bhkv}, {-(-(bh // bhkv * sq) // mp['BR'])})" in merge
    # the candidate's kernel defaults are the launch's constexprs: the agent's build gate checks what runs
    from argus_agent.codemod_base import constexpr_params, kernels, parse_source
    defaults = {fn.name.value: constexpr_params(fn) for fn in kernels(parse_source(src))}
    launched = fwd_params(t) if kernel == "attention_fwd" else decode_params(t)
    assert {key: defaults[kernel][key] for key in launched} == {key: repr(val) for key, val in launched.items()}
    assert "aligned16(x0.contiguous())" in src   # TMA-only kernels: an input at an odd address is copied
    assert first.tol == 1e-2    # bf16 as the reference
    # bf16 P in the PV product and the bf16 output: ~2e-3 relative, as the stdlib kernel's own tests
    _check(problem, first, tmp_path, name, rel=5e-3)


def test_projected_heads_feed_the_kernel_through_copies(tmp_path):
    """A causal self-attention block in bf16 (QKV Linear, heads by view/transpose): the head views are realized
    (B, H, S, D) and the kernel result feeds the output projection."""
    class Attn(torch.nn.Module):
        def __init__(self, dim=128, heads=2):
            super().__init__()
            self.heads = heads
            self.qkv = torch.nn.Linear(dim, 3 * dim)
            self.proj = torch.nn.Linear(dim, dim)

        def forward(self, x):
            b, s, d = x.shape
            q, k, v = self.qkv(x).split(d, dim=2)
            q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).reshape(b, s, d))

    torch.manual_seed(0)
    model = Attn().to(torch.bfloat16).eval()
    x = torch.randn(1, 24, 128).bfloat16()
    prog = lower_model(model, [x], "sm_90a")
    (t,) = [k for k in prog.kernels if isinstance(k, AttentionTemplate)]
    assert (t.bh, t.sq, t.d, t.causal) == (2, 24, 64, True)
    mod = _load(render_program(prog), tmp_path, "block")
    xs = torch.randn(1, 24, 128).bfloat16()
    with torch.no_grad():
        out = mod.argus_forward(model, xs)
        ref = model.double()(xs.double())
    assert out.dtype == torch.bfloat16
    assert float((out.double() - ref).norm() / ref.norm()) < 1e-2


# --------------------------------------------------------------------------- sm_90a: what falls back, why
FALLBACKS = {   # name: (shapes, call, dtype, the logged reason)
    # fp32 at head dims 32/64/128 runs attention_fp32 (tests/agent/test_lower_sdpa_fp32.py); others decompose
    "fp32": ([(1, 2, 33, 48)] * 3, "q, k, v", "torch.float32", "the fp32 kernel takes 32, 64 or 128"),
    "fp16": ([(1, 2, 33, 64)] * 3, "q, k, v", "torch.float16", "operands are float16"),
    "head_dim_32": ([(1, 2, 33, 32)] * 3, "q, k, v", "torch.bfloat16", "head dims 32/32/32"),
    "mask": ([(1, 2, 33, 64)] * 3 + ["torch.rand(33, 33) < 0.5"], "q, k, v, attn_mask=m", "torch.bfloat16",
             "attn_mask is given"),
}


@pytest.mark.parametrize("name", list(FALLBACKS))
def test_sm90a_falls_back_with_a_logged_reason(name, tmp_path, caplog):
    shapes, call, dtype, reason = FALLBACKS[name]
    args = "q, k, v, m" if "attn_mask" in call else "q, k, v"
    problem = _problem(tmp_path, name, shapes, call, dtype, args=args)
    with caplog.at_level(logging.INFO, logger="argus_agent.lower"):
        first = lower_problem(problem, target="sm_90a")
    assert not _templates(first) and "attention_fwd" not in first.source
    assert reason in caplog.text and "decomposed" in caplog.text
    assert f"{name}.py:" in caplog.text     # names the reference's line
    if name == "fp32":     # fp32 attention stays fp32: matched at fp32 accuracy
        assert first.tol < 1e-3
    _check(problem, first, tmp_path, name)


def test_kernel_plan_preconditions():
    bf = torch.empty(0, dtype=torch.bfloat16)

    class T:     # shapes and dtypes are all kernel_plan reads
        def __init__(self, *shape, dtype=torch.bfloat16):
            self.shape, self.dtype = shape, dtype

    q, kv = T(2, 8, 256, 128), T(2, 2, 256, 128)
    assert kernel_plan("sm_90a", q, q, q, None, 0.0, True, None, False) == ("fwd", 1)
    assert kernel_plan("sm_90a", q, kv, kv, None, 0.0, False, None, True) == ("fwd", 4)
    assert kernel_plan("sm_90a", T(2, 8, 16, 128), kv, kv, None, 0.0, False, None, True) == ("decode", 4)
    assert kernel_plan("sm_90a", T(2, 8, 17, 128), kv, kv, None, 0.0, False, None, True) == ("fwd", 4)
    assert kernel_plan("sm_90a", T(2, 8, 4, 128), kv, kv, None, 0.0, True, None, True) == ("fwd", 4)
    three = T(6, 100, 64)       # (N, S, D): N heads of their own
    assert kernel_plan("sm_90a", three, three, three, None, 0.0, True, 0.3, False) == ("fwd", 1)
    for args, why in [
        ((q, kv, kv, None, 0.0, False, None, False), "without enable_gqa"),
        ((q, q, q, None, 0.1, False, None, False), "dropout_p=0.1"),
        ((q, q, q, None, 0.0, False, -1.0, False), "scale=-1.0"),
        ((q, T(1, 8, 256, 128), T(1, 8, 256, 128), None, 0.0, False, None, False), "batch dims"),
        ((q, q, T(2, 8, 256, 64), None, 0.0, False, None, False), "head dims 128/128/64"),
        ((T(256, 128), T(256, 128), T(256, 128), None, 0.0, False, None, False), "rank"),
        ((q, q, q, bf, 0.0, False, None, False), "attn_mask"),
    ]:
        plan, reason = kernel_plan("sm_90a", *args)
        assert plan is None and why in reason, (why, reason)
    assert kernel_plan("cpu", q, q, q, None, 0.0, False, None, False)[0] is None


@pytest.mark.parametrize("name,launched", [("causal_d64", {"attention_fwd"}),
                                           ("decode_one_split", {"attention_decode_bf16"}),
                                           ("decode_gqa", {"attention_decode", "attention_merge"})])
def test_rendered_attention_kernels_verify_clean(name, launched, tmp_path):
    """The candidate's copies of the stdlib kernels pass tilepy-verify as the agent's gate runs them."""
    import tilepy as tp
    from argus_agent.gates import verify_kernels

    shapes, call, _ = SM90_CASES[name]
    first = lower_problem(_problem(tmp_path, "verify", shapes, call, "torch.bfloat16"), target="sm_90a")
    mod = _load(first.source, tmp_path, "verify")
    kernels = {k: v for k, v in vars(mod).items() if isinstance(v, tp.Kernel)}
    assert set(kernels) == launched
    verdict = verify_kernels(kernels, "sm_90a")
    assert verdict.ok, [f["message"] for f in verdict.findings if f["severity"] == "error"]


def test_aligned16_copies_only_what_a_tensor_map_cannot_describe():
    from argus_agent.runtime import aligned16

    store = torch.arange(65, dtype=torch.bfloat16)
    odd = store[1:].view(8, 8)                 # contiguous, 2 bytes past an aligned start
    even = store[8:].view(-1)[:56].view(7, 8)  # 16 bytes past it
    assert store.data_ptr() % 16 == 0
    out = aligned16(odd)
    assert out.data_ptr() % 16 == 0 and out.data_ptr() != odd.data_ptr() and torch.equal(out, odd)
    assert aligned16(even) is even


class _Sdpa(torch.nn.Module):
    def __init__(self, causal: bool, gqa: bool):
        super().__init__()
        self.causal, self.gqa = causal, gqa

    def forward(self, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=self.causal,
                                                                enable_gqa=self.gqa)


@pytest.mark.parametrize("b,h,hkv,sq,skv,d,causal,kernel", [
    (4, 16, 16, 2048, 2048, 128, False, "attention_fwd"),   # the policy's constexprs are the kernel's defaults
    (4, 16, 16, 2048, 2048, 128, True, "attention_fwd"),
    (4, 32, 8, 1, 8192, 128, False, "attention_decode"),
    (16, 32, 8, 1, 8192, 128, False, "attention_decode_bf16"),   # 128 KV heads fill the SMs: one split
])
def test_real_size_sources_carry_the_launch_constexprs(b, h, hkv, sq, skv, d, causal, kernel):
    """Rendering only (the GPU test runs these sizes): whether or not the launch's constexprs differ from the
    stdlib kernel's defaults, the candidate's kernel has them as its defaults."""
    from argus_agent.codemod_base import constexpr_params, kernels, parse_source

    shapes = [(b, h, sq, d), (b, hkv, skv, d), (b, hkv, skv, d)]
    prog = lower_model(_Sdpa(causal, h != hkv), [torch.empty(s, dtype=torch.bfloat16) for s in shapes], "sm_90a")
    src = render_program(prog)
    (t,) = [k for k in prog.kernels if isinstance(k, AttentionTemplate)]
    launched = fwd_params(t) if kernel == "attention_fwd" else decode_params(t)
    defaults = {fn.name.value: constexpr_params(fn) for fn in kernels(parse_source(src))}
    assert f"launch({kernel}," in src
    assert {k: defaults[kernel][k] for k in launched} == {k: repr(v) for k, v in launched.items()}


@pytest.mark.parametrize("name", ["gemm_hopper", "gemm_fp32", "conv_igemm", "attention"])
def test_stdlib_source_keeps_no_host_helper(name):
    """The kernel text put into a candidate holds the kernels and what they name, never a host helper: the
    stdlib's own `launch` (named in a kernel's docstring) would shadow the candidate's runtime launch."""
    import re

    from argus_agent.lower.templates import stdlib_source

    src = stdlib_source(name)
    defs = set(re.findall(r"^def (\w+)", src, re.M))
    assert not defs & {"launch", "reference", "split", "grid", "decode", "policy"}, defs
    assert "@tp.kernel" in src
