import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d with a 3x7 kernel and matching asymmetric padding."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, (3, 7), padding=(1, 3))

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(8, 64, 128, 256)]


def get_init_inputs():
    return [64, 64]


def get_cpu_inputs():
    return [torch.randn(2, 3, 11, 29)]


def get_cpu_init_inputs():
    return [3, 4]
