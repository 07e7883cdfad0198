import torch
import torch.nn as nn


class Model(nn.Module):
    """MaxPool3d with kernel 3, stride 2, padding 1."""

    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool3d(3, stride=2, padding=1)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(8, 32, 64, 64, 64)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(2, 2, 7, 11, 13)]


def get_cpu_init_inputs():
    return []
