import torch
import torch.nn as nn


class Model(nn.Module):
    """Outer product of two vectors (torch.outer)."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.outer(a, b)


def get_inputs():
    return [torch.randn(16384), torch.randn(16384)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(61), torch.randn(67)]


def get_cpu_init_inputs():
    return []
