import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over dimension 1 of a 2-D input (a module)."""

    def __init__(self):
        super().__init__()
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        return self.softmax(x)


def get_inputs():
    return [torch.randn(4096, 8192)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(37, 101)]


def get_cpu_init_inputs():
    return []
