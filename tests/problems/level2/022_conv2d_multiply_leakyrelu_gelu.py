import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Conv2d, a (C,1,1) multiplier, LeakyReLU, GELU."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3)
        self.multiplier = nn.Parameter(torch.randn(cout, 1, 1))

    def forward(self, x):
        return F.gelu(F.leaky_relu(self.conv(x) * self.multiplier, negative_slope=0.01))


def get_inputs():
    return [torch.randn(32, 32, 256, 256)]


def get_init_inputs():
    return [32, 32]


def get_cpu_inputs():
    return [torch.randn(2, 3, 15, 17)]


def get_cpu_init_inputs():
    return [3, 4]
