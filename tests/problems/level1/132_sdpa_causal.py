import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Causal scaled_dot_product_attention."""

    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def get_inputs():
    return [torch.randn(8, 16, 2048, 64), torch.randn(8, 16, 2048, 64), torch.randn(8, 16, 2048, 64)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(2, 3, 19, 8), torch.randn(2, 3, 19, 8), torch.randn(2, 3, 19, 8)]


def get_cpu_init_inputs():
    return []
