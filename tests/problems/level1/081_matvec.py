import torch
import torch.nn as nn


class Model(nn.Module):
    """Matrix-vector product."""

    def __init__(self):
        super().__init__()

    def forward(self, a, v):
        return torch.matmul(a, v)


def get_inputs():
    return [torch.randn(8192, 8192), torch.randn(8192)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(61, 53), torch.randn(53)]


def get_cpu_init_inputs():
    return []
