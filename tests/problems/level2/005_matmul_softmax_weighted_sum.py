import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, softmax over features, a weighted sum with a per-feature weight."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.weight = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
        p = torch.softmax(self.fc(x), dim=1)
        return (p * self.weight).sum(dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return [4096, 4096]


def get_cpu_inputs():
    return [torch.randn(13, 61)]


def get_cpu_init_inputs():
    return [61, 47]
