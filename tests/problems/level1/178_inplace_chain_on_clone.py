import torch
import torch.nn as nn


class Model(nn.Module):
    """In-place mul_, add_ and clamp_ on a clone of the input."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = x.clone()
        y.mul_(2.0).add_(1.0).clamp_(min=-1.0, max=3.0)
        return y


def get_inputs():
    return [torch.randn(4096, 8192)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(37, 101)]


def get_cpu_init_inputs():
    return []
