"""Recurrent layers: nn.LSTM / nn.GRU / nn.RNN kept whole by capture and lowered to the input projection's GEMM
and a host loop of `stdlib_kernels/rnn.py` steps (one RnnTemplate per layer, both directions in one launch per
step), against torch in float64: outputs, h_n and c_n, batch-first or not, bidirectional, stacked, with and
without biases or initial states; what the step kernel does not take (half precision) goes through torch's
decomposition instead."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from argus_agent.lower import lower_model

from .lowered import run_lowered


class States(nn.Module):
    """The recurrent module's output and its final states as a flat tuple."""

    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x, *state):
        out, st = self.rnn(x, (state if len(state) > 1 else state[0]) if state else None)
        return (out,) + (tuple(st) if isinstance(st, tuple) else (st,))


CASES = {
    "lstm_batch_first_2layers": (lambda: nn.LSTM(6, 8, 2, batch_first=True), (3, 5, 6), None),
    "lstm_bidirectional_given_state": (lambda: nn.LSTM(4, 5, 1, bidirectional=True), (4, 3, 4), [(2, 3, 5)] * 2),
    "gru_bidirectional_2layers": (lambda: nn.GRU(5, 7, 2, bidirectional=True), (4, 3, 5), [(4, 3, 7)]),
    "rnn_relu_no_bias": (lambda: nn.RNN(5, 6, 2, nonlinearity="relu", bias=False, batch_first=True), (2, 7, 5),
                         None),
    "rnn_tanh_bidirectional_batch_first": (lambda: nn.RNN(3, 4, 2, bidirectional=True, batch_first=True),
                                           (2, 6, 3), [(4, 2, 4)]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_recurrent_layers_lower_to_steps_and_match_float64(case, tmp_path):
    make, xshape, states = CASES[case]
    torch.manual_seed(3)
    model = States(make()).eval()
    g = torch.Generator().manual_seed(4)
    inputs = [torch.randn(xshape, generator=g)] + [torch.randn(s, generator=g) for s in states or []]
    prog, src, out, ref = run_lowered(model, inputs, tmp_path, case, target="cpu")
    layers, dirs = model.rnn.num_layers, 2 if model.rnn.bidirectional else 1
    assert [type(k).__name__ for k in prog.kernels].count("RnnTemplate") == layers    # both directions: one
    assert "for s in range(" in src        # the time loop is the host's: no per-step kernels
    assert len(out) == len(ref)
    for o, r in zip(out, ref):
        assert o.shape == r.shape and o.dtype == torch.float32
        assert torch.allclose(o.double(), r, rtol=1e-5, atol=1e-6), (o.double() - r).abs().max()


@pytest.mark.parametrize("case", ["lstm_bidirectional_given_state", "gru_bidirectional_2layers",
                                  "rnn_relu_no_bias"])
def test_on_sm90a_the_steps_run_on_tensor_cores_and_match_float64(case, tmp_path, monkeypatch):
    """Target sm_90a (run on the interpreter), torch.backends.cudnn.allow_tf32 off: the projection GEMM before
    the loop, then `rnn_step_tc` (split TF32 mma.sync, three products) per step, both directions in one
    launch; fp32-accurate against float64."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    make, xshape, states = CASES[case]
    torch.manual_seed(3)
    model = States(make()).eval()
    g = torch.Generator().manual_seed(4)
    inputs = [torch.randn(xshape, generator=g)] + [torch.randn(s, generator=g) for s in states or []]
    prog, src, out, ref = run_lowered(model, inputs, tmp_path, case + "_sm90a", target="sm_90a")
    assert [type(k).__name__ for k in prog.kernels].count("RnnTemplate") == model.rnn.num_layers
    assert "launch(rnn_step_tc," in src and "PASSES=3" in src
    for o, r in zip(out, ref):
        assert o.shape == r.shape and o.dtype == torch.float32
        assert torch.allclose(o.double(), r, rtol=1e-5, atol=1e-6), (o.double() - r).abs().max()


def test_under_cudnn_tf32_the_layer_computes_in_tf32_as_cudnn_does(tmp_path, monkeypatch):
    """PyTorch's default (torch.backends.cudnn.allow_tf32 on): cuDNN's fp32 RNNs take TF32 products, so the
    projection GEMM and the step run one TF32 product (PASSES=1), and the candidate's precision says so (its
    tolerance is the reduced one). The error is TF32's, well above the three-product form's."""
    from argus_agent.lower.candidate import precision_of

    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", True)
    make, xshape, states = CASES["gru_bidirectional_2layers"]
    torch.manual_seed(3)
    model = States(make()).eval()
    g = torch.Generator().manual_seed(4)
    inputs = [torch.randn(xshape, generator=g)] + [torch.randn(s, generator=g) for s in states]
    prog, src, out, ref = run_lowered(model, inputs, tmp_path, "gru_tf32", target="sm_90a")
    assert "launch(rnn_step_tc," in src and "PASSES=1" in src
    text, tol = precision_of(prog, inputs, on_gpu=True)
    assert "recurrent layers in tf32" in text and tol == 1e-2
    err = max((o.double() - r).abs().max().item() for o, r in zip(out, ref))
    assert 1e-6 < err < 1e-2, err


def test_a_long_sequence_lowers_in_a_few_kernels():
    """128 steps x 2 layers: one template per layer (the decomposed form was 517 kernels)."""
    model = States(nn.LSTM(16, 24, 2, batch_first=True)).eval()
    prog = lower_model(model, [torch.randn(4, 128, 16)], "sm_90a")
    assert len(prog.kernels) <= 8, [type(k).__name__ for k in prog.kernels]


def test_a_half_precision_lstm_runs_the_fp32_template_and_is_no_worse_than_eager(tmp_path):
    """A bf16 LSTM computes in fp32 through the same template (operands read up, results stored in bf16), as
    cuDNN's half RNNs keep fp32 accumulation and cell math: its error against float64 is no worse than eager's
    bf16 LSTM's (torch's per-op decomposition, rounding every intermediate to bf16, was 2.5x eager's)."""
    torch.manual_seed(5)
    model = States(nn.LSTM(4, 6, 1)).eval().to(torch.bfloat16)
    x = torch.randn(3, 2, 4).to(torch.bfloat16)
    with torch.no_grad():
        eager = model(x)
    prog, _, out, ref = run_lowered(model, [x], tmp_path, "bf16_lstm", target="cpu")
    assert "RnnTemplate" in [type(k).__name__ for k in prog.kernels]
    for o, e, r in zip(out, eager, ref):
        assert o.dtype == torch.bfloat16
        ours, theirs = (o.double() - r).abs().max().item(), (e.double() - r).abs().max().item()
        assert ours <= 1.5 * theirs + 1e-3, (ours, theirs)


def test_what_the_template_does_not_take_is_decomposed_and_still_matches(tmp_path):
    """An LSTM projection (proj_size) is torch's decomposition, per step, and still matches float64."""
    torch.manual_seed(6)
    model = States(nn.LSTM(4, 6, 1, proj_size=3)).eval()
    x = torch.randn(3, 2, 4)
    prog, _, out, ref = run_lowered(model, [x], tmp_path, "proj_lstm", target="cpu")
    assert "RnnTemplate" not in [type(k).__name__ for k in prog.kernels]
    for o, r in zip(out, ref):
        assert torch.allclose(o.double(), r, rtol=1e-5, atol=1e-6), (o.double() - r).abs().max()


class BiLstmHead(nn.Module):
    """level3/023's shape: a bidirectional LSTM given (h0, c0), a Linear on both directions' final hidden states."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 5, 1, bidirectional=True)
        self.fc = nn.Linear(10, 3)

    def forward(self, x, h0, c0):
        _, (h, _) = self.lstm(x, (h0, c0))
        return self.fc(torch.cat([h[0], h[1]], dim=1))


def test_capture_corrects_an_lstm_decomposition_that_leaves_a_step_dim(tmp_path, monkeypatch):
    """torch builds before pytorch/pytorch#185716 (2.11, the GPU machine's) return one_layer_lstm's final states as
    [1, batch, hidden]; the head's cat then fed the Linear a wrong shape and capture failed. With such a
    decomposition patched in, the capture still gives the right shapes and the program matches float64."""
    from torch._decomp import decompositions as decomp

    fixed = decomp.one_layer_lstm

    def with_step_dim(inp, hidden, params, has_biases, reverse=False):
        out, (h, c) = fixed(inp, hidden, params, has_biases, reverse=reverse)
        return out, (h.unsqueeze(0), c.unsqueeze(0))

    monkeypatch.setattr(decomp, "one_layer_lstm", with_step_dim)
    torch.manual_seed(5)
    model = BiLstmHead().eval()
    g = torch.Generator().manual_seed(6)
    inputs = [torch.randn(4, 3, 4, generator=g), torch.randn(2, 3, 5, generator=g), torch.randn(2, 3, 5, generator=g)]
    with pytest.raises(RuntimeError, match="reduction dim"):    # the patched decomposition is the broken one
        with torch.backends.mkldnn.flags(enabled=False), torch.no_grad():
            torch.export.export(model, tuple(inputs), strict=False)
    _, _, out, ref = run_lowered(model, inputs, tmp_path, "bilstm_head", target="cpu")
    assert out.shape == ref.shape == (3, 3)
    assert torch.allclose(out.double(), ref, rtol=1e-5, atol=1e-6), (out.double() - ref).abs().max()
