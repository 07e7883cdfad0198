import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear without bias, a bias vector, ReLU, divide by a constant."""

    def __init__(self, in_features: int, out_features: int, divisor: float):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)
        self.divisor = divisor

    def forward(self, x):
        return torch.relu(self.fc(x) + self.bias) / self.divisor


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return [4096, 4096, 2.0]


def get_cpu_inputs():
    return [torch.randn(13, 61)]


def get_cpu_init_inputs():
    return [61, 47, 2.0]
