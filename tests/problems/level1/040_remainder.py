import torch
import torch.nn as nn


class Model(nn.Module):
    """Python-style remainder by a scalar (sign of the divisor)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.remainder(x, 0.75)


def get_inputs():
    return [torch.randn(4096, 8192)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(47, 61)]


def get_cpu_init_inputs():
    return []
