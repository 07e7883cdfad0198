import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Swin shifted-window attention: roll, window partition, attention with a position bias, merge, roll back."""

    def __init__(self, d: int, heads: int, window: int):
        super().__init__()
        self.heads, self.window = heads, window
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.bias = nn.Parameter(torch.randn(heads, window * window, window * window) * 0.02)

    def forward(self, x):
        B, H, W, C = x.shape
        w, h = self.window, self.heads
        x = torch.roll(x, shifts=(-(w // 2), -(w // 2)), dims=(1, 2))
        t = x.view(B, H // w, w, W // w, w, C).permute(0, 1, 3, 2, 4, 5).reshape(-1, w * w, C)
        q, k, v = self.qkv(t).view(t.shape[0], w * w, 3, h, C // h).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1)) * (C // h) ** -0.5 + self.bias
        o = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(-1, w * w, C)
        o = self.proj(o).view(B, H // w, W // w, w, w, C).permute(0, 1, 3, 2, 4, 5).reshape(B, H, W, C)
        return torch.roll(o, shifts=(w // 2, w // 2), dims=(1, 2))


def get_inputs():
    return [torch.randn(32, 56, 56, 128)]


def get_init_inputs():
    return [128, 4, 7]


def get_cpu_inputs():
    return [torch.randn(2, 4, 6, 8)]


def get_cpu_init_inputs():
    return [8, 2, 2]
