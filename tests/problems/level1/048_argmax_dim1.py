import torch
import torch.nn as nn


class Model(nn.Module):
    """argmax over the middle dimension."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.argmax(x, dim=1)


def get_inputs():
    return [torch.randn(16, 2048, 1024)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(3, 41, 23)]


def get_cpu_init_inputs():
    return []
