import torch
import torch.nn as nn


class Model(nn.Module):
    """A three-layer GRU (batch first) given h0; returns h_n, the last hidden state of every layer."""

    def __init__(self, d_in: int, hidden: int, layers: int):
        super().__init__()
        self.gru = nn.GRU(d_in, hidden, layers, batch_first=True)

    def forward(self, x, h0):
        _, h = self.gru(x, h0)
        return h


def get_inputs():
    return [torch.randn(32, 96, 128), torch.randn(3, 32, 256)]


def get_init_inputs():
    return [128, 256, 3]


def get_cpu_inputs():
    return [torch.randn(3, 4, 5), torch.randn(3, 3, 6)]


def get_cpu_init_inputs():
    return [5, 6, 3]
