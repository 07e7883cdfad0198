import torch
import torch.nn as nn


class Model(nn.Module):
    """Hard shrinkage with lambda 0.3 (nn.Hardshrink) on a 3-D input."""

    def __init__(self):
        super().__init__()
        self.shrink = nn.Hardshrink(0.3)

    def forward(self, x):
        return self.shrink(x)


def get_inputs():
    return [torch.randn(64, 512, 1024)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(3, 17, 41)]


def get_cpu_init_inputs():
    return []
