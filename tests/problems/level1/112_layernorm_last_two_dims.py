import torch
import torch.nn as nn


class Model(nn.Module):
    """LayerNorm over the last two dimensions of a 4-D tensor."""

    def __init__(self, h: int, w: int):
        super().__init__()
        self.norm = nn.LayerNorm((h, w))

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(32, 128, 64, 64)]


def get_init_inputs():
    return [64, 64]


def get_cpu_inputs():
    return [torch.randn(3, 5, 7, 9)]


def get_cpu_init_inputs():
    return [7, 9]
