import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.MultiheadAttention self-attention (batch first), attention weights not returned."""

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.mha = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True)

    def forward(self, x):
        out, _ = self.mha(x, x, x, need_weights=False)
        return out


def get_inputs():
    return [torch.randn(16, 1024, 1024)]


def get_init_inputs():
    return [1024, 16]


def get_cpu_inputs():
    return [torch.randn(2, 13, 24)]


def get_cpu_init_inputs():
    return [24, 3]
