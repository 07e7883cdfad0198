import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, Swish, a per-feature bias, GroupNorm."""

    def __init__(self, in_features: int, out_features: int, groups: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)
        self.norm = nn.GroupNorm(groups, out_features)

    def forward(self, x):
        x = self.fc(x)
        return self.norm(x * torch.sigmoid(x) + self.bias)


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return [4096, 4096, 32]


def get_cpu_inputs():
    return [torch.randn(13, 61)]


def get_cpu_init_inputs():
    return [61, 48, 4]
