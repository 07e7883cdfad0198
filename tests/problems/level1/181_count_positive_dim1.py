import torch
import torch.nn as nn


class Model(nn.Module):
    """Number of positive elements per row, an int64 sum of a boolean test."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return (x > 0).sum(dim=1)


def get_inputs():
    return [torch.randn(4096, 8192)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(37, 101)]


def get_cpu_init_inputs():
    return []
