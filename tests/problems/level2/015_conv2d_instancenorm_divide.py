import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d, InstanceNorm2d, divide by a constant."""

    def __init__(self, cin: int, cout: int, divide_by: float):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3)
        self.norm = nn.InstanceNorm2d(cout)
        self.divide_by = divide_by

    def forward(self, x):
        return self.norm(self.conv(x)) / self.divide_by


def get_inputs():
    return [torch.randn(32, 32, 256, 256)]


def get_init_inputs():
    return [32, 32, 2.0]


def get_cpu_inputs():
    return [torch.randn(2, 3, 15, 17)]


def get_cpu_init_inputs():
    return [3, 4, 2.0]
