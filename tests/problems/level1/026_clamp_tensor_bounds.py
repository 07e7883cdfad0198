import torch
import torch.nn as nn


class Model(nn.Module):
    """Clamp to per-column tensor bounds lo <= hi."""

    def __init__(self):
        super().__init__()

    def forward(self, x, lo, hi):
        return torch.clamp(x, min=lo, max=lo + hi.abs())


def get_inputs():
    return [torch.randn(4096, 8192), torch.randn(8192), torch.randn(8192)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(37, 101), torch.randn(101), torch.randn(101)]


def get_cpu_init_inputs():
    return []
