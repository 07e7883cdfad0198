import torch
import torch.nn as nn


class Model(nn.Module):
    """Zero the elements where a boolean mask is false."""

    def __init__(self):
        super().__init__()

    def forward(self, x, mask):
        return x.masked_fill(~mask, 0.0)


def get_inputs():
    return [torch.randn(4096, 8192), torch.rand(4096, 8192) < 0.5]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(37, 101), torch.rand(37, 101) < 0.5]


def get_cpu_init_inputs():
    return []
