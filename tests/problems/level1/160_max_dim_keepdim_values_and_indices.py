import torch
import torch.nn as nn


class Model(nn.Module):
    """torch.max over dim 1 with keepdim, returning values and indices."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        values, indices = torch.max(x, dim=1, keepdim=True)
        return values, indices


def get_inputs():
    return [torch.randn(64, 1024, 2048)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(3, 29, 37)]


def get_cpu_init_inputs():
    return []
