import torch
import torch.nn as nn


class Model(nn.Module):
    """AvgPool2d with padding and ceil_mode."""

    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(16, 64, 256, 256)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(2, 3, 23, 29)]


def get_cpu_init_inputs():
    return []
