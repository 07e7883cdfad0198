import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Max pooling 3x3 stride 2 returning the pooled values and their flat indices."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        values, indices = F.max_pool2d(x, 3, stride=2, return_indices=True)
        return values, indices


def get_inputs():
    return [torch.randn(32, 64, 256, 256)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(2, 3, 17, 19)]


def get_cpu_init_inputs():
    return []
