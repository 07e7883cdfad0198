import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Cross attention in bf16: queries shorter than keys, not causal."""

    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


def get_inputs():
    return [
        torch.randn(16, 16, 512, 64, dtype=torch.bfloat16),
        torch.randn(16, 16, 4096, 64, dtype=torch.bfloat16),
        torch.randn(16, 16, 4096, 64, dtype=torch.bfloat16),
    ]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [
        torch.randn(2, 3, 7, 8, dtype=torch.bfloat16),
        torch.randn(2, 3, 23, 8, dtype=torch.bfloat16),
        torch.randn(2, 3, 23, 8, dtype=torch.bfloat16),
    ]


def get_cpu_init_inputs():
    return []
