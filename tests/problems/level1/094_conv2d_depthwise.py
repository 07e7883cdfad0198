import torch
import torch.nn as nn


class Model(nn.Module):
    """Depthwise Conv2d (groups = channels)."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=channels)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(16, 128, 256, 256)]


def get_init_inputs():
    return [128]


def get_cpu_inputs():
    return [torch.randn(2, 6, 17, 19)]


def get_cpu_init_inputs():
    return [6]
