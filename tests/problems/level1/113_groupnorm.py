import torch
import torch.nn as nn


class Model(nn.Module):
    """GroupNorm with 8 groups."""

    def __init__(self, groups: int, channels: int):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(16, 64, 256, 256)]


def get_init_inputs():
    return [8, 64]


def get_cpu_inputs():
    return [torch.randn(2, 6, 17, 19)]


def get_cpu_init_inputs():
    return [2, 6]
