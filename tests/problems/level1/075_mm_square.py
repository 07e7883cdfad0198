import torch
import torch.nn as nn


class Model(nn.Module):
    """Square matrix multiply."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(4096, 4096), torch.randn(4096, 4096)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(45, 45), torch.randn(45, 45)]


def get_cpu_init_inputs():
    return []
