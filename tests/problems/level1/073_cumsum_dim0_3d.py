import torch
import torch.nn as nn


class Model(nn.Module):
    """Cumulative sum over dimension 0 of a 3-D tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.cumsum(x, dim=0)


def get_inputs():
    return [torch.randn(512, 256, 512)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(23, 11, 13)]


def get_cpu_init_inputs():
    return []
