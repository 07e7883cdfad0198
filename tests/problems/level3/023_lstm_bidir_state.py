import torch
import torch.nn as nn


class Model(nn.Module):
    """A bidirectional LSTM given its initial states; a Linear on both directions' final hidden states."""

    def __init__(self, d_in: int, hidden: int, out: int):
        super().__init__()
        self.lstm = nn.LSTM(d_in, hidden, 1, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, out)

    def forward(self, x, h0, c0):
        _, (h, _) = self.lstm(x, (h0, c0))
        return self.fc(torch.cat([h[0], h[1]], dim=1))


def get_inputs():
    return [torch.randn(64, 32, 128), torch.randn(2, 32, 256), torch.randn(2, 32, 256)]


def get_init_inputs():
    return [128, 256, 16]


def get_cpu_inputs():
    return [torch.randn(4, 3, 5), torch.randn(2, 3, 6), torch.randn(2, 3, 6)]


def get_cpu_init_inputs():
    return [5, 6, 4]
