import torch
import torch.nn as nn


class Model(nn.Module):
    """Concatenate two tensors along dimension 1."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.cat([x, y], dim=1)


def get_inputs():
    return [torch.randn(4096, 4096), torch.randn(4096, 8192)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(37, 29), torch.randn(37, 53)]


def get_cpu_init_inputs():
    return []
