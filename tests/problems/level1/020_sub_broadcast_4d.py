import torch
import torch.nn as nn


class Model(nn.Module):
    """Subtract a per-pixel map broadcast over channels."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return x - y


def get_inputs():
    return [torch.randn(16, 64, 128, 128), torch.randn(16, 1, 128, 128)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(2, 7, 13, 17), torch.randn(2, 1, 13, 17)]


def get_cpu_init_inputs():
    return []
