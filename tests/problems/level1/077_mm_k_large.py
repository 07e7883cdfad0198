import torch
import torch.nn as nn


class Model(nn.Module):
    """Matrix multiply with a very large reduction dimension."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.mm(a, b)


def get_inputs():
    return [torch.randn(256, 131072), torch.randn(131072, 256)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(7, 511), torch.randn(511, 5)]


def get_cpu_init_inputs():
    return []
