import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d 3x3, padding 1, no bias."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(16, 64, 128, 128)]


def get_init_inputs():
    return [64, 128]


def get_cpu_inputs():
    return [torch.randn(2, 3, 19, 23)]


def get_cpu_init_inputs():
    return [3, 5]
