import torch
import torch.nn as nn


class Model(nn.Module):
    """Expand a per-batch row over the sequence and multiply."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return x.expand(-1, y.shape[1], -1) * y


def get_inputs():
    return [torch.randn(16, 1, 4096), torch.randn(16, 2048, 4096)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(3, 1, 61), torch.randn(3, 19, 61)]


def get_cpu_init_inputs():
    return []
