import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.Linear without bias on a 3-D input."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        return self.fc(x)


def get_inputs():
    return [torch.randn(16, 512, 1024)]


def get_init_inputs():
    return [1024, 4096]


def get_cpu_inputs():
    return [torch.randn(2, 7, 31)]


def get_cpu_init_inputs():
    return [31, 43]
