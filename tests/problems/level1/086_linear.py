import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.Linear with bias."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.fc(x)


def get_inputs():
    return [torch.randn(2048, 4096)]


def get_init_inputs():
    return [4096, 4096]


def get_cpu_inputs():
    return [torch.randn(13, 61)]


def get_cpu_init_inputs():
    return [61, 47]
