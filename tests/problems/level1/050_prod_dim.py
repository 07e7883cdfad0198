import torch
import torch.nn as nn


class Model(nn.Module):
    """Product over a short middle dimension."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.prod(x, dim=1)


def get_inputs():
    return [torch.randn(65536, 8, 64)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(37, 8, 13)]


def get_cpu_init_inputs():
    return []
