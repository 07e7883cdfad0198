import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Conv2d, subtract a (C,1,1) offset, Mish twice."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3)
        self.offset = nn.Parameter(torch.randn(cout, 1, 1) * 0.5)

    def forward(self, x):
        return F.mish(F.mish(self.conv(x) - self.offset))


def get_inputs():
    return [torch.randn(32, 32, 256, 256)]


def get_init_inputs():
    return [32, 32]


def get_cpu_inputs():
    return [torch.randn(2, 3, 15, 17)]


def get_cpu_init_inputs():
    return [3, 4]
