import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose1d, a (C,1) bias, tanh, sum over channels."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.ConvTranspose1d(cin, cout, 4, stride=2, padding=1)
        self.bias = nn.Parameter(torch.randn(cout, 1) * 0.1)

    def forward(self, x):
        return torch.tanh(self.conv(x) + self.bias).sum(dim=1)


def get_inputs():
    return [torch.randn(64, 64, 8192)]


def get_init_inputs():
    return [64, 64]


def get_cpu_inputs():
    return [torch.randn(2, 5, 61)]


def get_cpu_init_inputs():
    return [5, 4]
