import torch
import torch.nn as nn


class Model(nn.Module):
    """x[0] + x[-1]: integer indexing on the leading dimension."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x[0] + x[-1]


def get_inputs():
    return [torch.randn(8, 4096, 4096)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(4, 23, 41)]


def get_cpu_init_inputs():
    return []
