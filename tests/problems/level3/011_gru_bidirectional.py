import torch
import torch.nn as nn


class Model(nn.Module):
    """A bidirectional two-layer GRU (sequence first) from a given initial state; returns the output sequence."""

    def __init__(self, d_in: int, hidden: int, layers: int):
        super().__init__()
        self.gru = nn.GRU(d_in, hidden, layers, bidirectional=True)

    def forward(self, x, h0):
        out, _ = self.gru(x, h0)
        return out


def get_inputs():
    return [torch.randn(256, 32, 128), torch.randn(4, 32, 256)]


def get_init_inputs():
    return [128, 256, 2]


def get_cpu_inputs():
    return [torch.randn(5, 3, 6), torch.randn(4, 3, 7)]


def get_cpu_init_inputs():
    return [6, 7, 2]
