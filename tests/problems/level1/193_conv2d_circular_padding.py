import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d 3x3 with circular padding (padding_mode='circular')."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1, padding_mode="circular")

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(16, 64, 256, 256)]


def get_init_inputs():
    return [64, 128]


def get_cpu_inputs():
    return [torch.randn(2, 3, 13, 17)]


def get_cpu_init_inputs():
    return [3, 5]
