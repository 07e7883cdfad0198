"""Recurrent layers on a real GPU: nn.LSTM / nn.GRU / nn.RNN lowered to a host loop of stdlib rnn_step
launches, against eager (cuDNN) on the GPU and float64 on the CPU. Skips without a GPU."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU here (torch.cuda.is_available() is False): GPU tests need the device machine",
                allow_module_level=True)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import torch.nn as nn  # noqa: E402

from argus_agent.lower import lower_model, render_program  # noqa: E402

pytestmark = pytest.mark.gpu


class States(nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        out, st = self.rnn(x)
        return (out,) + (tuple(st) if isinstance(st, tuple) else (st,))


@pytest.mark.parametrize("make,xshape", [
    (lambda: nn.LSTM(96, 160, 2, batch_first=True), (37, 50, 96)),
    (lambda: nn.GRU(64, 130, 2, bidirectional=True), (40, 19, 64)),
    (lambda: nn.RNN(33, 70, 1, nonlinearity="relu"), (25, 9, 33)),
], ids=["lstm", "gru_bidirectional", "rnn_relu"])
def test_recurrent_layer_on_gpu_matches_float64(make, xshape, tmp_path):
    torch.manual_seed(0)
    model = States(make()).eval()
    x = torch.randn(xshape)
    prog = lower_model(model, [x], "sm_90a")
    assert "RnnTemplate" in [type(k).__name__ for k in prog.kernels]
    p = tmp_path / "rnn_gpu.py"
    p.write_text(render_program(prog))
    spec = importlib.util.spec_from_file_location("rnn_gpu", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    gm, xg = model.cuda(), x.cuda()
    with torch.no_grad():
        out = mod.argus_forward(gm, xg)
        eager = gm(xg)
        exact = States(make()).double()
        exact.load_state_dict({k: v.double().cpu() for k, v in model.state_dict().items()})
        ref = exact(x.double())
    for o, e, r in zip(out, eager, ref):
        ours, theirs = (o.double().cpu() - r).abs().max().item(), (e.double().cpu() - r).abs().max().item()
        assert ours <= max(2e-5, 1.5 * theirs), (ours, theirs)     # fp32 FMA steps: no worse than cuDNN's
