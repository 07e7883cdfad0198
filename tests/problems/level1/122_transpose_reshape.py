import torch
import torch.nn as nn


class Model(nn.Module):
    """Merge heads: (B, H, S, D) -> (B, S, H * D)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        b, h, s, d = x.shape
        return x.transpose(1, 2).reshape(b, s, h * d)


def get_inputs():
    return [torch.randn(16, 32, 1024, 128)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(2, 3, 23, 19)]


def get_cpu_init_inputs():
    return []
