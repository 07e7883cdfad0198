import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """F.conv1d with a parameter weight, dilation 2 and padding='same', no bias."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels, 5) * 0.1)

    def forward(self, x):
        return F.conv1d(x, self.weight, padding="same", dilation=2)


def get_inputs():
    return [torch.randn(64, 128, 16384)]


def get_init_inputs():
    return [128, 128]


def get_cpu_inputs():
    return [torch.randn(2, 5, 37)]


def get_cpu_init_inputs():
    return [5, 7]
