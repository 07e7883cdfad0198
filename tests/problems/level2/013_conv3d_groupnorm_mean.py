import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv3d, GroupNorm, mean over all but the batch."""

    def __init__(self, cin: int, cout: int, groups: int):
        super().__init__()
        self.conv = nn.Conv3d(cin, cout, 3)
        self.norm = nn.GroupNorm(groups, cout)

    def forward(self, x):
        return self.norm(self.conv(x)).mean(dim=(1, 2, 3, 4))


def get_inputs():
    return [torch.randn(8, 16, 32, 64, 64)]


def get_init_inputs():
    return [16, 32, 8]


def get_cpu_inputs():
    return [torch.randn(2, 3, 5, 7, 9)]


def get_cpu_init_inputs():
    return [3, 4, 2]
