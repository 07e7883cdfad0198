import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Conv3d, HardSwish, GroupNorm, mean over channels and space."""

    def __init__(self, in_channels: int, out_channels: int, groups: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, 3)
        self.norm = nn.GroupNorm(groups, out_channels)

    def forward(self, x):
        x = F.hardswish(self.conv(x))
        x = self.norm(x)
        return x.mean(dim=[1, 2, 3, 4])


def get_inputs():
    return [torch.randn(16, 32, 32, 64, 64)]


def get_init_inputs():
    return [32, 64, 8]


def get_cpu_inputs():
    return [torch.randn(2, 3, 7, 9, 11)]


def get_cpu_init_inputs():
    return [3, 8, 4]
