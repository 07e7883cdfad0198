import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear without bias, then a bias vector, GELU and a per-feature scale."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)
        self.scale = nn.Parameter(torch.rand(out_features) + 0.5)

    def forward(self, x):
        return F.gelu(self.fc(x) + self.bias) * self.scale


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return [4096, 4096]


def get_cpu_inputs():
    return [torch.randn(13, 61)]


def get_cpu_init_inputs():
    return [61, 47]
