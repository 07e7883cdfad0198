import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """SiLU (swish): x * sigmoid(x)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.silu(x)


def get_inputs():
    return [torch.randn(16, 1024, 4096)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(5, 11, 67)]


def get_cpu_init_inputs():
    return []
