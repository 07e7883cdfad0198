import torch
import torch.nn as nn


class Model(nn.Module):
    """Global AdaptiveAvgPool3d to 1x1x1."""

    def __init__(self):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool3d(1)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(8, 64, 32, 64, 64)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(2, 3, 7, 9, 11)]


def get_cpu_init_inputs():
    return []
