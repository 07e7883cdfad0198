import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Constant padding of the last two dimensions with an uneven pad."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.pad(x, (1, 2, 3, 0), value=0.5)


def get_inputs():
    return [torch.randn(16, 64, 256, 256)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(2, 5, 13, 17)]


def get_cpu_init_inputs():
    return []
