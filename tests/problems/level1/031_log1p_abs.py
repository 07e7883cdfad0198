import torch
import torch.nn as nn


class Model(nn.Module):
    """log1p of the absolute value."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.log1p(x.abs())


def get_inputs():
    return [torch.randn(4096, 8192)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(59, 67)]


def get_cpu_init_inputs():
    return []
