import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d, a (C,1,1) bias, a (C,1,1) scale, sigmoid, GroupNorm."""

    def __init__(self, cin: int, cout: int, groups: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3)
        self.bias = nn.Parameter(torch.randn(cout, 1, 1) * 0.1)
        self.scale = nn.Parameter(torch.randn(cout, 1, 1))
        self.norm = nn.GroupNorm(groups, cout)

    def forward(self, x):
        return self.norm(torch.sigmoid((self.conv(x) + self.bias) * self.scale))


def get_inputs():
    return [torch.randn(32, 32, 256, 256)]


def get_init_inputs():
    return [32, 32, 8]


def get_cpu_inputs():
    return [torch.randn(2, 3, 15, 17)]


def get_cpu_init_inputs():
    return [3, 4, 2]
