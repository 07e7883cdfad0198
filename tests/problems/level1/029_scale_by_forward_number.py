import torch
import torch.nn as nn


class Model(nn.Module):
    """Multiply by a plain Python float passed to forward."""

    def __init__(self):
        super().__init__()

    def forward(self, x, alpha: float):
        return x * alpha


def get_inputs():
    return [torch.randn(4096, 8192), 0.7]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(37, 101), 0.7]


def get_cpu_init_inputs():
    return []
