import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over the last dimension of a 3-D tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(8, 1024, 4096)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(3, 11, 101)]


def get_cpu_init_inputs():
    return []
