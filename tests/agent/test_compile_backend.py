"""torch.compile(model, backend="argus"): the same lowering behind torch's backend entry point."""

import logging

import torch


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 8)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x):
        return torch.nn.functional.gelu(self.norm(self.lin(x))).softmax(-1) * 2


def test_compiled_model_matches_eager_through_the_entry_point():
    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(5, 16)
    compiled = torch.compile(model, backend="argus")   # found by name: no import of argus_agent needed
    with torch.no_grad():
        got, want = compiled(x), model(x)
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5)


def test_graph_that_cannot_be_lowered_runs_eagerly_and_says_why(caplog):
    class Odd(torch.nn.Module):
        def forward(self, x):
            return torch.histc(x + 1, bins=7) * 2

    x = torch.randn(6)
    torch._dynamo.reset()
    with caplog.at_level(logging.WARNING, logger="argus_agent.compile"):
        out = torch.compile(Odd(), backend="argus")(x)
    assert torch.equal(out, Odd()(x))
    assert any("histc" in r.getMessage() and "eagerly" in r.getMessage() for r in caplog.records)


def test_backend_returns_kernels_for_a_lowered_graph():
    from argus_agent.compile_backend import argus_backend

    gm = torch.fx.symbolic_trace(Block().eval())
    fn = argus_backend(gm, [torch.randn(3, 16)])
    assert getattr(fn, "argus_kernels", 0) >= 1
