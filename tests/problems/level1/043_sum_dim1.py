import torch
import torch.nn as nn


class Model(nn.Module):
    """Sum over the middle dimension of a 3-D tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sum(x, dim=1)


def get_inputs():
    return [torch.randn(16, 4096, 1024)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(3, 37, 29)]


def get_cpu_init_inputs():
    return []
