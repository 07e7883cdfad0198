import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv3d, divide by a constant, MaxPool3d, global average pool, a (C,1,1,1) bias, sum over channels."""

    def __init__(self, cin: int, cout: int, divisor: float):
        super().__init__()
        self.conv = nn.Conv3d(cin, cout, 3)
        self.divisor = divisor
        self.pool = nn.MaxPool3d(2)
        self.gap = nn.AdaptiveAvgPool3d(1)
        self.bias = nn.Parameter(torch.randn(cout, 1, 1, 1))

    def forward(self, x):
        x = self.pool(self.conv(x) / self.divisor)
        return (self.gap(x) + self.bias).sum(dim=1)


def get_inputs():
    return [torch.randn(8, 16, 32, 64, 64)]


def get_init_inputs():
    return [16, 32, 2.0]


def get_cpu_inputs():
    return [torch.randn(2, 3, 5, 7, 9)]


def get_cpu_init_inputs():
    return [3, 4, 2.0]
