import torch
import torch.nn as nn


class Model(nn.Module):
    """A @ B.T with B stored N x K."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b.t())


def get_inputs():
    return [torch.randn(2048, 4096), torch.randn(4096, 4096)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(23, 31), torch.randn(19, 31)]


def get_cpu_init_inputs():
    return []
