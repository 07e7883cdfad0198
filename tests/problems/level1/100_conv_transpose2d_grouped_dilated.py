import torch
import torch.nn as nn


class Model(nn.Module):
    """Grouped, dilated ConvTranspose2d without bias."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.ConvTranspose2d(channels, channels, 3, padding=2, dilation=2, groups=4, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(16, 64, 128, 128)]


def get_init_inputs():
    return [64]


def get_cpu_inputs():
    return [torch.randn(2, 8, 13, 15)]


def get_cpu_init_inputs():
    return [8]
