import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, GroupNorm, Swish, a per-feature multiplier, Swish."""

    def __init__(self, in_features: int, out_features: int, groups: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.norm = nn.GroupNorm(groups, out_features)
        self.multiplier = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
        x = self.norm(self.fc(x))
        x = x * torch.sigmoid(x) * self.multiplier
        return x * torch.sigmoid(x)


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return [4096, 4096, 16]


def get_cpu_inputs():
    return [torch.randn(13, 61)]


def get_cpu_init_inputs():
    return [61, 48, 4]
