import torch
import torch.nn as nn


class Model(nn.Module):
    """LayerNorm over the last dimension."""

    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(4096, 8192)]


def get_init_inputs():
    return [8192]


def get_cpu_inputs():
    return [torch.randn(37, 101)]


def get_cpu_init_inputs():
    return [101]
