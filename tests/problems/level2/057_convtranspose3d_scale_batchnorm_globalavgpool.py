import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose3d, a constant scale, BatchNorm3d (eval), global average pool."""

    def __init__(self, cin: int, cout: int, scale: float):
        super().__init__()
        self.conv = nn.ConvTranspose3d(cin, cout, 3, stride=2)
        self.scale = scale
        self.bn = nn.BatchNorm3d(cout)
        self.gap = nn.AdaptiveAvgPool3d(1)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        return self.gap(self.bn(self.conv(x) * self.scale))


def get_inputs():
    return [torch.randn(8, 32, 16, 32, 32)]


def get_init_inputs():
    return [32, 32, 0.5]


def get_cpu_inputs():
    return [torch.randn(2, 3, 4, 5, 6)]


def get_cpu_init_inputs():
    return [3, 4, 0.5]
