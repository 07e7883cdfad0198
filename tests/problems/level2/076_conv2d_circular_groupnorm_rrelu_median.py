import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d with circular padding, GroupNorm, RReLU (eval), median over channels."""

    def __init__(self, in_channels: int, out_channels: int, groups: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1, padding_mode="circular")
        self.norm = nn.GroupNorm(groups, out_channels)
        self.act = nn.RReLU(0.05, 0.2)

    def forward(self, x):
        x = self.act(self.norm(self.conv(x)))
        return torch.median(x, dim=1).values


def get_inputs():
    return [torch.randn(32, 64, 128, 128)]


def get_init_inputs():
    return [64, 32, 8]


def get_cpu_inputs():
    return [torch.randn(2, 3, 11, 13)]


def get_cpu_init_inputs():
    return [3, 8, 2]
