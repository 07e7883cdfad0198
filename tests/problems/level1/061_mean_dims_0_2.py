import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean over the non-adjacent dimensions 0 and 2."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.mean(dim=(0, 2))


def get_inputs():
    return [torch.randn(64, 1024, 1024)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(7, 23, 19)]


def get_cpu_init_inputs():
    return []
