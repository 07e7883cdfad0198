import torch
import torch.nn as nn


class Model(nn.Module):
    """Strict upper triangle minus half the strict lower triangle of batched matrices."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.triu(x, diagonal=1) - 0.5 * x.tril(-1)


def get_inputs():
    return [torch.randn(64, 1024, 1024)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(3, 29, 29)]


def get_cpu_init_inputs():
    return []
