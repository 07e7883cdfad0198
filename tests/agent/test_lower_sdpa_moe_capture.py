"""What torch.export does with MoE-shaped programs (docs/lowering.md, "Attention and MoE"): the dense-dispatch
form captures with static shapes and lowers op by op (the scatter family is lowered), the sparse form captures
only with data-dependent sizes and is refused naming `aten.nonzero` and the reference's line, `torch._grouped_mm`
stays one node."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from argus_agent.lower import LoweringError, lower_model
from argus_agent.lower.graph import capture_program

T, H, FF, E, K = 16, 32, 48, 4, 2


class _Experts(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.router = torch.nn.Linear(H, E, bias=False)
        self.w1 = torch.nn.Parameter(torch.randn(E, H, FF) * 0.1)
        self.w3 = torch.nn.Parameter(torch.randn(E, H, FF) * 0.1)
        self.w2 = torch.nn.Parameter(torch.randn(E, FF, H) * 0.1)

    def route(self, x):
        w, ids = torch.topk(torch.softmax(self.router(x), -1), K, -1)
        return w / w.sum(-1, keepdim=True), ids


class Dense(_Experts):
    def forward(self, x):
        w, ids = self.route(x)
        gate = torch.zeros(x.shape[0], E).scatter(1, ids, w)                     # (T, E) routing weights
        h = F.silu(torch.einsum("th,ehf->etf", x, self.w1)) * torch.einsum("th,ehf->etf", x, self.w3)
        return torch.einsum("te,eth->th", gate, torch.einsum("etf,efh->eth", h, self.w2))


class Sparse(_Experts):
    def forward(self, x):
        w, ids = self.route(x)
        out = torch.zeros_like(x)
        for e in range(E):
            tok, slot = torch.where(ids == e)
            h = F.silu(x[tok] @ self.w1[e]) * (x[tok] @ self.w3[e])
            out = out.index_add(0, tok, (h @ self.w2[e]) * w[tok, slot, None])
        return out


class Grouped(_Experts):
    def forward(self, x):
        w, ids = self.route(x)
        order = torch.argsort(ids.reshape(-1), stable=True)
        xs = x[order // K]
        offs = torch.cumsum(F.one_hot(ids.reshape(-1), E).sum(0), 0).to(torch.int32)
        h = F.silu(torch._grouped_mm(xs, self.w1, offs=offs)) * torch._grouped_mm(xs, self.w3, offs=offs)
        y = torch.zeros(T * K, H, dtype=x.dtype).index_copy(0, order, torch._grouped_mm(h, self.w2, offs=offs))
        return (y.view(T, K, H) * w[..., None]).sum(1)


def _ops(model, x):
    cap = capture_program(model, [x])
    nodes = [n for n in cap.program.graph.nodes if n.op == "call_function"]
    return {str(n.target) for n in nodes}, nodes


def test_dense_dispatch_captures_with_static_shapes():
    torch.manual_seed(0)
    ops, nodes = _ops(Dense(), torch.randn(T, H))
    assert {"aten.topk.default", "aten.scatter.src", "aten.bmm.default"} <= ops
    assert not any("nonzero" in op or "_assert_scalar" in op for op in ops)
    assert all(isinstance(d, int) for n in nodes for v in [n.meta.get("val")] if isinstance(v, torch.Tensor)
               for d in v.shape)


def test_sparse_dispatch_captures_only_with_data_dependent_sizes():
    torch.manual_seed(0)
    ops, nodes = _ops(Sparse(), torch.randn(T, H))
    assert "aten.nonzero.default" in ops
    assert any(not isinstance(d, int) for n in nodes for v in [n.meta.get("val")] if isinstance(v, torch.Tensor)
               for d in v.shape)


@pytest.mark.skipif(not hasattr(torch, "_grouped_mm"), reason="this torch has no torch._grouped_mm")
def test_grouped_mm_stays_one_node():
    torch.manual_seed(0)
    model, x = Grouped().to(torch.bfloat16), torch.randn(T, H).bfloat16()
    with torch.no_grad():
        model(x)                       # eager runs it (CPU included)
    ops, nodes = _ops(model, x)
    assert "aten._grouped_mm.default" in ops and "aten.sort.stable" in ops
    assert sum(str(n.target) == "aten._grouped_mm.default" for n in nodes) == 3


def test_sparse_dispatch_is_refused_naming_the_data_dependent_op_and_the_line():
    """The sparse form's torch.where(ids == e) has a data-dependent size (aten.nonzero): refused, named with
    the reference's line (the lowering specializes to static shapes)."""
    torch.manual_seed(0)
    with pytest.raises(LoweringError, match=r"test_lower_sdpa_moe_capture.py:\d+: .*aten\.nonzero"):
        lower_model(Sparse(), [torch.randn(T, H)], "sm_90a")


def test_dense_dispatch_lowers_generically_and_matches_eager(tmp_path):
    """With the scatter family lowered (ops_scatter.py) the dense form lowers op by op: the (T, E) gate from
    zeros.scatter(1, topk ids, weights) is written out into its consumer (k = 2 candidates per element)."""
    import importlib.util

    from argus_agent.lower import render_program

    torch.manual_seed(0)
    model, x = Dense(), torch.randn(T, H)
    prog = lower_model(model, [x], "cpu")
    assert not any(str(getattr(k, "what", "")).startswith("aten.scatter") for k in prog.kernels)
    path = tmp_path / "dense_moe.py"
    path.write_text(render_program(prog))
    spec = importlib.util.spec_from_file_location("dense_moe", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        out, ref = mod.argus_forward(model, x), model(x)
        ids = torch.topk(torch.softmax(model.router(x), -1), K, -1).indices
        w1, w3, w2 = model.w1.double(), model.w3.double(), model.w2.double()
        want = torch.zeros(T, H, dtype=torch.float64)            # float64, token by token over its k experts
        p = torch.softmax(model.router(x).double(), -1)
        for t in range(T):
            sel = p[t, ids[t]] / p[t, ids[t]].sum()
            for s, e in enumerate(ids[t].tolist()):
                xt = x[t].double()
                want[t] += sel[s] * ((F.silu(xt @ w1[e]) * (xt @ w3[e])) @ w2[e])
    assert torch.allclose(out.double(), want, atol=1e-5, rtol=1e-5)
    assert torch.allclose(out, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(not hasattr(torch, "_grouped_mm"), reason="this torch has no torch._grouped_mm")
def test_grouped_mm_form_lowers_op_by_op_and_matches(tmp_path):
    """The grouped form (a stable sort of the assignments, a one-hot count, cumsum offsets, three
    torch._grouped_mm, index_copy back) lowers end to end: _grouped_mm as a reduction over K gathering each
    row's group matrix (ops_moe._grouped_mm). Against eager bf16 and float64 at bf16's 1e-2."""
    import importlib.util

    from argus_agent.lower import render_program

    torch.manual_seed(0)
    model, x = Grouped().to(torch.bfloat16), torch.randn(T, H).bfloat16()
    prog = lower_model(model, [x], "cpu")
    path = tmp_path / "grouped_moe.py"
    path.write_text(render_program(prog))
    spec = importlib.util.spec_from_file_location("grouped_moe", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        out, ref = mod.argus_forward(model, x), model(x)
        p = torch.softmax(x.double() @ model.router.weight.double().t(), -1)
        wv, ids = torch.topk(p, K, -1)
        wv = wv / wv.sum(-1, keepdim=True)
        w1, w3, w2 = model.w1.double(), model.w3.double(), model.w2.double()
        want = torch.zeros(T, H, dtype=torch.float64)
        for t in range(T):
            xt = x[t].double()
            for s, e in enumerate(ids[t].tolist()):
                want[t] += wv[t, s] * ((F.silu(xt @ w1[e]) * (xt @ w3[e])) @ w2[e])
    assert out.dtype == torch.bfloat16
    assert torch.allclose(out.double(), ref.double(), atol=1e-2, rtol=1e-2)
    assert torch.allclose(out.double(), want, atol=1e-2, rtol=1e-2)
