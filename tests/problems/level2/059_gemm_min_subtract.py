import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, minimum with a constant, subtract the constant."""

    def __init__(self, in_features: int, out_features: int, constant: float):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.constant = constant

    def forward(self, x):
        return torch.clamp(self.fc(x), max=self.constant) - self.constant


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return [4096, 4096, 0.5]


def get_cpu_inputs():
    return [torch.randn(13, 61)]


def get_cpu_init_inputs():
    return [61, 47, 0.5]
