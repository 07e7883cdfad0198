import torch
import torch.nn as nn


class Model(nn.Module):
    """Batched matmul broadcasting a batch and a head dimension."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(8, 1, 512, 256), torch.randn(1, 16, 256, 512)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(2, 1, 7, 9), torch.randn(1, 3, 9, 11)]


def get_cpu_init_inputs():
    return []
