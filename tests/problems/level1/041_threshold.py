import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Threshold: x where x > 0.1 else -1."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.threshold(x, 0.1, -1.0)


def get_inputs():
    return [torch.randn(4096, 8192)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(43, 79)]


def get_cpu_init_inputs():
    return []
