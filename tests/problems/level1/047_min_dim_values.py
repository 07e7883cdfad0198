import torch
import torch.nn as nn


class Model(nn.Module):
    """torch.min over a dimension, taking the values."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.min(x, dim=1).values


def get_inputs():
    return [torch.randn(16, 2048, 1024)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(3, 37, 29)]


def get_cpu_init_inputs():
    return []
