import torch
import torch.nn as nn


class Model(nn.Module):
    """SELU."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.selu(x)


def get_inputs():
    return [torch.randn(2048, 16384)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(13, 257)]


def get_cpu_init_inputs():
    return []
