import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d with stride 2, dilation 2 and padding 2."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, stride=2, padding=2, dilation=2)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(16, 32, 256, 256)]


def get_init_inputs():
    return [32, 64]


def get_cpu_inputs():
    return [torch.randn(2, 3, 21, 25)]


def get_cpu_init_inputs():
    return [3, 4]
