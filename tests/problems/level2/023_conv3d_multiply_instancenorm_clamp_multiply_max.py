import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv3d, (C,1,1,1) multiplier, InstanceNorm3d, clamp, multiplier again, max over channels."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv3d(cin, cout, 3)
        self.multiplier = nn.Parameter(torch.randn(cout, 1, 1, 1))
        self.norm = nn.InstanceNorm3d(cout)

    def forward(self, x):
        x = self.norm(self.conv(x) * self.multiplier)
        x = torch.clamp(x, -1.0, 1.0) * self.multiplier
        return torch.amax(x, dim=1)


def get_inputs():
    return [torch.randn(8, 16, 32, 64, 64)]


def get_init_inputs():
    return [16, 32]


def get_cpu_inputs():
    return [torch.randn(2, 3, 5, 7, 9)]


def get_cpu_init_inputs():
    return [3, 4]
