import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """QKV projection, causal scaled_dot_product_attention, output projection."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, s, d))


def get_inputs():
    return [torch.randn(8, 2048, 1024)]


def get_init_inputs():
    return [1024, 16]


def get_cpu_inputs():
    return [torch.randn(2, 11, 24)]


def get_cpu_init_inputs():
    return [24, 3]
