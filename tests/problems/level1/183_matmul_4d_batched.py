import torch
import torch.nn as nn


class Model(nn.Module):
    """4-D batched matmul (batch, heads, M, K) @ (batch, heads, K, N)."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(8, 16, 512, 256), torch.randn(8, 16, 256, 512)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(2, 3, 7, 11), torch.randn(2, 3, 11, 5)]


def get_cpu_init_inputs():
    return []
