import torch
import torch.nn as nn


class Model(nn.Module):
    """baddbmm: c + 0.5 * (a @ b) per batch."""

    def __init__(self):
        super().__init__()

    def forward(self, c, a, b):
        return torch.baddbmm(c, a, b, beta=1.0, alpha=0.5)


def get_inputs():
    return [torch.randn(32, 1024, 1024), torch.randn(32, 1024, 512), torch.randn(32, 512, 1024)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(3, 17, 19), torch.randn(3, 17, 23), torch.randn(3, 23, 19)]


def get_cpu_init_inputs():
    return []
