import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Conv2d, GroupNorm, Mish, MaxPool2d."""

    def __init__(self, cin: int, cout: int, groups: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm = nn.GroupNorm(groups, cout)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        return self.pool(F.mish(self.norm(self.conv(x))))


def get_inputs():
    return [torch.randn(32, 32, 256, 256)]


def get_init_inputs():
    return [32, 64, 8]


def get_cpu_inputs():
    return [torch.randn(2, 3, 15, 17)]


def get_cpu_init_inputs():
    return [3, 8, 4]
