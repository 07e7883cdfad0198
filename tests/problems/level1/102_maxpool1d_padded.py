import torch
import torch.nn as nn


class Model(nn.Module):
    """MaxPool1d with kernel 4, stride 2, padding 1."""

    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool1d(kernel_size=4, stride=2, padding=1)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(32, 64, 16384)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(2, 5, 131)]


def get_cpu_init_inputs():
    return []
