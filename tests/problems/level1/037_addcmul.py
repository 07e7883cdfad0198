import torch
import torch.nn as nn


class Model(nn.Module):
    """addcmul: x + 0.5 * y * z."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y, z):
        return torch.addcmul(x, y, z, value=0.5)


def get_inputs():
    return [torch.randn(4096, 4096), torch.randn(4096, 4096), torch.randn(4096, 4096)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(37, 53), torch.randn(37, 53), torch.randn(37, 53)]


def get_cpu_init_inputs():
    return []
