import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, softmax, cumulative sum (a CDF), clamp at 1, subtract an offset."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.offset = nn.Parameter(torch.rand(out_features))

    def forward(self, x):
        cdf = torch.cumsum(torch.softmax(self.fc(x), dim=1), dim=1)
        return torch.clamp(cdf, max=1.0) - self.offset


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return [4096, 4096]


def get_cpu_inputs():
    return [torch.randn(13, 61)]


def get_cpu_init_inputs():
    return [61, 47]
