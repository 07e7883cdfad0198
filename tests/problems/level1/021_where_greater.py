import torch
import torch.nn as nn


class Model(nn.Module):
    """torch.where on a comparison of two tensors."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.where(x > y, x, 0.1 * y)


def get_inputs():
    return [torch.randn(4096, 8192), torch.randn(4096, 8192)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(37, 53), torch.randn(37, 53)]


def get_cpu_init_inputs():
    return []
