"""Run the lowered recurrent layers once on small sizes (for compute-sanitizer memcheck / racecheck):
    compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_rnn.py"""

import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from argus_agent.lower import lower_model, render_program  # noqa: E402


class Outputs(nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        return self.rnn(x)[0]


def main():
    import importlib.util
    import tempfile

    for name, rnn, x in [("lstm", nn.LSTM(24, 40, 2, batch_first=True, bidirectional=True), torch.randn(5, 7, 24)),
                         ("gru", nn.GRU(16, 33, 1), torch.randn(6, 3, 16)),
                         ("rnn", nn.RNN(8, 20, 1, nonlinearity="relu"), torch.randn(4, 9, 8))]:
        model = Outputs(rnn).eval()
        src = render_program(lower_model(model, [x], "sm_90a"))
        path = os.path.join(tempfile.mkdtemp(), f"san_{name}.py")
        open(path, "w").write(src)
        spec = importlib.util.spec_from_file_location(f"san_{name}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        gm = model.cuda()
        with torch.no_grad():
            out = mod.argus_forward(gm, x.cuda())
            ref = gm(x.cuda())
        torch.cuda.synchronize()
        print(name, "max |ours - eager|", (out - ref).abs().max().item())


if __name__ == "__main__":
    main()
