import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Mish: x * tanh(softplus(x))."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.mish(x)


def get_inputs():
    return [torch.randn(32, 64, 128, 128)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(2, 5, 17, 19)]


def get_cpu_init_inputs():
    return []
