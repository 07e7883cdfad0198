import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, softmax over the batch dimension, a per-feature scale."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.rand(out_features) + 0.5)

    def forward(self, x):
        return torch.softmax(self.fc(x), dim=0) * self.scale


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return [4096, 4096]


def get_cpu_inputs():
    return [torch.randn(13, 61)]


def get_cpu_init_inputs():
    return [61, 47]
