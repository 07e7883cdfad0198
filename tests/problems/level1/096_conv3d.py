import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv3d 3x3x3, padding 1, with bias."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv3d(cin, cout, 3, padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(8, 32, 32, 64, 64)]


def get_init_inputs():
    return [32, 64]


def get_cpu_inputs():
    return [torch.randn(2, 3, 7, 9, 11)]


def get_cpu_init_inputs():
    return [3, 4]
