import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear, LayerNorm, GELU, a per-feature scale."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.norm = nn.LayerNorm(out_features)
        self.scale = nn.Parameter(torch.rand(out_features) * 2.0)

    def forward(self, x):
        return F.gelu(self.norm(self.fc(x))) * self.scale


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return [4096, 2048]


def get_cpu_inputs():
    return [torch.randn(13, 61)]


def get_cpu_init_inputs():
    return [61, 47]
