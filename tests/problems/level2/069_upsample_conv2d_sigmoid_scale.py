import torch
import torch.nn as nn


class Model(nn.Module):
    """Nearest upsampling by 2, Conv2d, sigmoid, per-channel scale."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.scale = nn.Parameter(torch.rand(out_channels, 1, 1) * 2.0)

    def forward(self, x):
        return torch.sigmoid(self.conv(self.up(x))) * self.scale


def get_inputs():
    return [torch.randn(16, 64, 128, 128)]


def get_init_inputs():
    return [64, 64]


def get_cpu_inputs():
    return [torch.randn(2, 3, 7, 9)]


def get_cpu_init_inputs():
    return [3, 5]
