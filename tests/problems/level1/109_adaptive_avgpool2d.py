import torch
import torch.nn as nn


class Model(nn.Module):
    """AdaptiveAvgPool2d to 7x7 from sizes that do not divide evenly."""

    def __init__(self):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d((7, 7))

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(16, 256, 127, 129)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(2, 3, 23, 29)]


def get_cpu_init_inputs():
    return []
