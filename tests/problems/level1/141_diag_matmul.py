import torch
import torch.nn as nn


class Model(nn.Module):
    """diag(a) @ B: a vector scales the rows of B, written as a product with a diagonal matrix."""

    def __init__(self):
        super().__init__()

    def forward(self, a, B):
        return torch.diag(a) @ B


def get_inputs():
    return [torch.randn(4096), torch.randn(4096, 8192)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(37), torch.randn(37, 53)]


def get_cpu_init_inputs():
    return []
