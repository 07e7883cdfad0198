import torch
import torch.nn as nn


class Model(nn.Module):
    """Elementwise power with a tensor exponent on a positive base."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.pow(x.abs() + 0.5, y)


def get_inputs():
    return [torch.randn(4096, 8192), torch.randn(4096, 8192)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(43, 47), torch.randn(43, 47)]


def get_cpu_init_inputs():
    return []
