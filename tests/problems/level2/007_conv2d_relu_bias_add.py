import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d, ReLU, add a (C,1,1) bias."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3)
        self.bias = nn.Parameter(torch.randn(cout, 1, 1) * 0.1)

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.bias


def get_inputs():
    return [torch.randn(64, 32, 128, 128)]


def get_init_inputs():
    return [32, 64]


def get_cpu_inputs():
    return [torch.randn(2, 3, 15, 17)]


def get_cpu_init_inputs():
    return [3, 5]
