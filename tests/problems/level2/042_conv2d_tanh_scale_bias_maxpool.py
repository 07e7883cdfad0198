import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d, tanh, a constant scale, a (C,1,1) bias, MaxPool2d."""

    def __init__(self, cin: int, cout: int, scaling_factor: float):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3)
        self.scaling_factor = scaling_factor
        self.bias = nn.Parameter(torch.randn(cout, 1, 1) * 0.1)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        x = torch.tanh(self.conv(x)) * self.scaling_factor + self.bias
        return self.pool(x)


def get_inputs():
    return [torch.randn(32, 32, 256, 256)]


def get_init_inputs():
    return [32, 32, 2.0]


def get_cpu_inputs():
    return [torch.randn(2, 3, 15, 17)]


def get_cpu_init_inputs():
    return [3, 4, 2.0]
