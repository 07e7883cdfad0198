import torch
import torch.nn as nn


class Model(nn.Module):
    """A two-layer LSTM over a sequence (batch first, zero initial state); a Linear head on the last step."""

    def __init__(self, d_in: int, hidden: int, layers: int, classes: int):
        super().__init__()
        self.lstm = nn.LSTM(d_in, hidden, layers, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1, :])


def get_inputs():
    return [torch.randn(64, 128, 256)]


def get_init_inputs():
    return [256, 512, 2, 10]


def get_cpu_inputs():
    return [torch.randn(3, 5, 6)]


def get_cpu_init_inputs():
    return [6, 8, 2, 4]
