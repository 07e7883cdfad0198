import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """scaled_dot_product_attention, not causal."""

    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


def get_inputs():
    return [torch.randn(8, 16, 1024, 64), torch.randn(8, 16, 1024, 64), torch.randn(8, 16, 1024, 64)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(2, 3, 17, 8), torch.randn(2, 3, 17, 8), torch.randn(2, 3, 17, 8)]


def get_cpu_init_inputs():
    return []
