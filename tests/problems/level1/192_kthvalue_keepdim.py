import torch
import torch.nn as nn


class Model(nn.Module):
    """Third smallest value and its index along the last dim, keepdim (Tensor.kthvalue)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        values, indices = x.kthvalue(3, dim=-1, keepdim=True)
        return values, indices


def get_inputs():
    return [torch.randn(524288, 64)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(41, 23)]


def get_cpu_init_inputs():
    return []
