"""Recurrent layers on a real GPU: nn.LSTM / nn.GRU / nn.RNN lowered to the input projection's fp32 GEMM and a
host loop of stdlib rnn_step_tc launches (tensor cores, split TF32), against eager (cuDNN) on the GPU and float64
on the CPU. Skips without a GPU."""

from __future__ import annotations

import importlib.util

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

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


@pytest.mark.parametrize("tf32", [False, True], ids=["fp32", "cudnn_tf32"])
@pytest.mark.parametrize("make,xshape", [
    (lambda: nn.LSTM(96, 160, 2, batch_first=True), (37, 50, 96)),
    (lambda: nn.GRU(64, 130, 2, bidirectional=True), (40, 19, 64)),
    (lambda: nn.RNN(33, 70, 1, nonlinearity="relu"), (25, 9, 33)),
], ids=["lstm", "gru_bidirectional", "rnn_relu"])
def test_recurrent_layer_on_gpu_matches_float64(make, xshape, tf32, tmp_path, monkeypatch):
    """torch.backends.cudnn.allow_tf32 off: three TF32 products per term, no worse than cuDNN's FMA math; on
    (PyTorch's default): one, as cuDNN's TF32 math, within a few times cuDNN's own error."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", tf32)
    torch.manual_seed(0)
    model = States(make()).eval()
    x = torch.randn(xshape)
    prog = lower_model(model, [x], "sm_90a")
    kinds = [k for k in prog.kernels if type(k).__name__ == "RnnTemplate"]
    assert kinds and all(k.tc and k.passes == (1 if tf32 else 3) for k in kinds)
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
        if tf32:
            assert ours <= max(1e-3, 4 * theirs), (ours, theirs)
        else:
            assert ours <= max(2e-5, 1.5 * theirs), (ours, theirs)


class BiLstmGivenStates(nn.Module):
    """level3/023's shape of model: a bidirectional LSTM given (h0, c0), a Linear on both final hidden states."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(40, 48, 1, bidirectional=True)
        self.fc = nn.Linear(96, 10)

    def forward(self, x, h0, c0):
        _, (h, _) = self.lstm(x, (h0, c0))
        return self.fc(torch.cat([h[0], h[1]], dim=1))


def test_rnn_model_captured_from_cuda_tensors(tmp_path, monkeypatch):
    """A model and inputs already on the GPU (as the suite and the agent pass them), captured under the GPU
    machine's torch (2.11, whose LSTM decomposition leaves a step dimension on the final states: the capture
    corrects it); the program matches float64."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    torch.manual_seed(1)
    model = BiLstmGivenStates().eval()
    x, h0, c0 = torch.randn(21, 6, 40), torch.randn(2, 6, 48), torch.randn(2, 6, 48)
    gm = BiLstmGivenStates().eval()
    gm.load_state_dict(model.state_dict())
    gm = gm.cuda()
    args = [x.cuda(), h0.cuda(), c0.cuda()]
    p = tmp_path / "bilstm_gpu.py"
    p.write_text(render_program(lower_model(gm, args, "sm_90a")))
    spec = importlib.util.spec_from_file_location("bilstm_gpu", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        out = mod.argus_forward(gm, *args).double().cpu()
        eager = gm(*args).double().cpu()
        exact = BiLstmGivenStates().double()
        exact.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
        ref = exact(x.double(), h0.double(), c0.double())
    ours, theirs = (out - ref).abs().max().item(), (eager - ref).abs().max().item()
    assert ours <= max(2e-5, 1.5 * theirs), (ours, theirs)
