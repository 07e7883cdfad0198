import torch
import torch.nn as nn


class Model(nn.Module):
    """sin(x) * cos(y)."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.sin(x) * torch.cos(y)


def get_inputs():
    return [torch.randn(4096, 8192), torch.randn(4096, 8192)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(37, 53), torch.randn(37, 53)]


def get_cpu_init_inputs():
    return []
