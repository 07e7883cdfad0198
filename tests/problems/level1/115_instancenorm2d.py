import torch
import torch.nn as nn


class Model(nn.Module):
    """InstanceNorm2d without affine parameters."""

    def __init__(self, channels: int):
        super().__init__()
        self.norm = nn.InstanceNorm2d(channels)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(16, 64, 256, 256)]


def get_init_inputs():
    return [64]


def get_cpu_inputs():
    return [torch.randn(2, 6, 17, 19)]


def get_cpu_init_inputs():
    return [6]
