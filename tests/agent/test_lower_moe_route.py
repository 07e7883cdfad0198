"""Routed-expert subgraphs reach stdlib_kernels/moe.py (ops_moe.py, issue 16 item 5): three spellings of a
bf16 top-k MoE layer (stacked weights with a scatter gate and einsums; a one-hot gate with bmm; per-expert
nn.Linear experts in a Python loop with an index_add gate) lowered for sm_90a become one MoeTemplate (no expert
GEMM of the op-by-op lowering is left), and the host program run on the CPU interpreter (the grouped GEMMs at
moe.TINY tiles) matches eager and float64 at bf16's 1e-2. What is not an MoE of that function (no
renormalization, a bf16 softmax, fp32 weights, the CPU target) is lowered op by op."""

from __future__ import annotations

import importlib.util

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from argus_agent.lower import lower_model, ops_moe, render_program
from stdlib_kernels import moe

H, FF, E, K = 64, 64, 4, 2


class Stacked(nn.Module):
    """(E, H, F) weights, scatter gate, einsum experts (level2/078's form, routed in float32)."""

    def __init__(self, renormalize=True, float_softmax=True):
        super().__init__()
        self.renormalize, self.float_softmax = renormalize, float_softmax
        self.router = nn.Linear(H, E, bias=False)
        self.w1 = nn.Parameter(torch.randn(E, H, FF) * H**-0.5)
        self.w3 = nn.Parameter(torch.randn(E, H, FF) * H**-0.5)
        self.w2 = nn.Parameter(torch.randn(E, FF, H) * FF**-0.5)

    def forward(self, x):
        logits = self.router(x)
        probs = torch.softmax(logits.float() if self.float_softmax else logits, dim=-1)
        w, ids = torch.topk(probs, K, dim=-1)
        if self.renormalize:
            w = w / w.sum(dim=-1, keepdim=True)
        gate = torch.zeros(x.shape[0], E, dtype=w.dtype).scatter(1, ids, w)
        h = F.silu(torch.einsum("th,ehf->etf", x, self.w1)) * torch.einsum("th,ehf->etf", x, self.w3)
        y = torch.einsum("etf,efh->eth", h, self.w2)
        return torch.einsum("te,eth->th", gate.float(), y.float()).to(x.dtype)


class OneHot(Stacked):
    """One-hot gate, experts as bmm of the expanded input (level2/079's form)."""

    def forward(self, x):
        w, ids = torch.topk(torch.softmax(self.router(x).float(), dim=-1), K, dim=-1)
        w = w / w.sum(dim=-1, keepdim=True)
        gate = (F.one_hot(ids, E).to(w.dtype) * w[..., None]).sum(dim=1)
        xe = x.unsqueeze(0).expand(E, -1, -1)
        y = torch.bmm(F.silu(torch.bmm(xe, self.w1)) * torch.bmm(xe, self.w3), self.w2)
        return (gate.t().unsqueeze(-1) * y.float()).sum(dim=0).to(x.dtype)


class Looped(nn.Module):
    """Mixtral-style experts (one module per expert holding w1, w2, w3 Linears), gate by index_add over the
    flattened (token, expert) grid, experts looped densely; (B, S, H) input."""

    def __init__(self):
        super().__init__()
        self.router = nn.Linear(H, E, bias=False)
        self.experts = nn.ModuleList(
            nn.ModuleDict(dict(w1=nn.Linear(H, FF, bias=False), w2=nn.Linear(FF, H, bias=False),
                               w3=nn.Linear(H, FF, bias=False))) for _ in range(E))

    def forward(self, x):
        t = x.reshape(-1, H)
        n = t.shape[0]
        w, ids = torch.topk(torch.softmax(self.router(t).float(), dim=-1), K, dim=-1)
        w = w / w.sum(dim=-1, keepdim=True)
        slots = (torch.arange(n)[:, None] * E + ids).reshape(-1)
        gate = torch.zeros(n * E).index_add(0, slots, w.reshape(-1)).view(n, E)
        out = torch.zeros(n, H)
        for e, ex in enumerate(self.experts):
            out = out + gate[:, e : e + 1] * ex["w2"](F.silu(ex["w1"](t)) * ex["w3"](t)).float()
        return out.to(x.dtype).view_as(x)


def _routed(prog):
    return [k for k in prog.kernels if isinstance(k, ops_moe.MoeTemplate)]


def _run(prog, model, x, tmp_path, name):
    path = tmp_path / f"{name}.py"
    path.write_text(render_program(prog))
    spec = importlib.util.spec_from_file_location(f"moe_route_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        return mod.argus_forward(model, x)


def _float64(model, x):
    """The MoE in float64 from the model's own weights, token by token over its k experts."""
    m = {n: p.detach().double() for n, p in model.named_parameters()}
    t = x.reshape(-1, H).double()
    p = torch.softmax(t @ m["router.weight"].t(), -1)
    wv, ids = torch.topk(p, K, -1)
    wv = wv / wv.sum(-1, keepdim=True)
    out = torch.zeros_like(t)
    for e in range(E):
        if "w1" in m:
            w1, w3, w2 = m["w1"][e], m["w3"][e], m["w2"][e]
        else:
            w1, w3, w2 = (m[f"experts.{e}.{k}.weight"].t() for k in ("w1", "w3", "w2"))
        tok, slot = torch.nonzero(ids == e, as_tuple=True)
        out.index_add_(0, tok, ((F.silu(t[tok] @ w1) * (t[tok] @ w3)) @ w2) * wv[tok, slot, None])
    return out.view(x.shape)


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(ops_moe, "PRESETS_OVERRIDE", moe.TINY)


@pytest.mark.parametrize("cls, shape", [(Stacked, (19, H)), (OneHot, (37, H)), (Looped, (2, 9, H))],
                         ids=["stacked-scatter-einsum", "one-hot-bmm", "per-expert-loop-index-add"])
def test_moe_spellings_are_routed_to_the_stdlib_kernels_and_match(cls, shape, tiny, tmp_path):
    torch.manual_seed(0)
    model = cls().to(torch.bfloat16)
    x = torch.randn(*shape).bfloat16()
    prog = lower_model(model, [x], "sm_90a")
    (t,) = _routed(prog)
    assert (t.T, t.H, t.F, t.E, t.topk) == (x.numel() // H, H, FF, E, K)
    assert not any(type(k).__name__ in ("MatmulTemplate", "Fp32GemmTemplate") or getattr(k, "extra", {}).get("matmul")
                   and getattr(k, "R", 0) in (H, FF) and getattr(k, "M", 0) >= x.numel() // H * FF
                   for k in prog.kernels)                     # no expert GEMM of the op-by-op lowering left
    out = _run(prog, model, x, tmp_path, cls.__name__)
    with torch.no_grad():
        ref = model(x)
    assert out.shape == ref.shape and out.dtype == torch.bfloat16
    assert torch.allclose(out.double(), ref.double(), atol=1e-2, rtol=1e-2)
    assert torch.allclose(out.double(), _float64(model, x), atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("kw, why", [(dict(renormalize=False), "no renormalization: another function"),
                                     (dict(float_softmax=False), "a bf16 softmax: eager routes on rounded "
                                                                 "probabilities")])
def test_other_functions_are_not_routed(kw, why):
    torch.manual_seed(0)
    model = Stacked(**kw).to(torch.bfloat16)
    prog = lower_model(model, [torch.randn(19, H).bfloat16()], "sm_90a")
    assert not _routed(prog), why


def test_fp32_and_the_cpu_target_lower_op_by_op(tmp_path):
    torch.manual_seed(0)
    model, x = Stacked(), torch.randn(19, H)
    assert not _routed(lower_model(model, [x], "sm_90a"))       # the stdlib kernels are bf16
    prog = lower_model(model.to(torch.bfloat16), [x.bfloat16()], "cpu")
    assert not _routed(prog)
    out = _run(prog, model, x.bfloat16(), tmp_path, "cpu_target")
    assert torch.allclose(out.double(), _float64(model, x.bfloat16()), atol=1e-2, rtol=1e-2)


def test_generated_moe_kernels_carry_the_launch_constexprs(tiny, tmp_path):
    """Each stdlib kernel in the candidate has the launch's constexprs as its defaults (the agent's gate builds
    and checks kernels at their defaults), and its helpers cannot meet a GEMM template's."""
    import inspect

    torch.manual_seed(0)
    prog = lower_model(OneHot().to(torch.bfloat16), [torch.randn(37, H).bfloat16()], "sm_90a")
    (t,) = _routed(prog)
    src = ops_moe.moe_source([t])
    assert "def _moe_threads" in src and "def _threads" not in src
    path = tmp_path / "moe_kernels.py"
    path.write_text("import tilepy as tp\n\n" + src)
    spec = importlib.util.spec_from_file_location("moe_kernels_candidate", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for kernel, values in (("moe_gemm13", moe.TINY["gemm13"]), ("moe_gemm2", moe.TINY["gemm2"]),
                           ("moe_route", ops_moe.route_params(t)), ("moe_permute", ops_moe.permute_params(t)),
                           ("moe_combine", ops_moe.combine_params(t))):
        sig = inspect.signature(getattr(mod, kernel).fn)
        for name, v in values.items():
            assert sig.parameters[name].default == v, (kernel, name)
