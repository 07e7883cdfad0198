import torch
import torch.nn as nn


class Model(nn.Module):
    """InstanceNorm3d with affine parameters on a 5-D input."""

    def __init__(self, channels: int):
        super().__init__()
        self.norm = nn.InstanceNorm3d(channels, affine=True)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(16, 32, 32, 64, 64)]


def get_init_inputs():
    return [32]


def get_cpu_inputs():
    return [torch.randn(2, 3, 5, 7, 9)]


def get_cpu_init_inputs():
    return [3]
