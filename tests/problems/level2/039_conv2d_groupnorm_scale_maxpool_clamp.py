import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d, GroupNorm, a (C,1,1) scale, MaxPool2d, clamp."""

    def __init__(self, cin: int, cout: int, groups: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3)
        self.norm = nn.GroupNorm(groups, cout)
        self.scale = nn.Parameter(torch.randn(cout, 1, 1))
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        x = self.norm(self.conv(x)) * self.scale
        return torch.clamp(self.pool(x), 0.0, 1.0)


def get_inputs():
    return [torch.randn(32, 32, 256, 256)]


def get_init_inputs():
    return [32, 32, 8]


def get_cpu_inputs():
    return [torch.randn(2, 3, 15, 17)]


def get_cpu_init_inputs():
    return [3, 4, 2]
