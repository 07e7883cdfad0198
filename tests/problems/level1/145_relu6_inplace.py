import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU6 (nn.ReLU6(inplace=True)) of a scaled input."""

    def __init__(self):
        super().__init__()
        self.act = nn.ReLU6(inplace=True)

    def forward(self, x):
        y = x * 4.0
        return self.act(y)


def get_inputs():
    return [torch.randn(4096, 8192)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(37, 101)]


def get_cpu_init_inputs():
    return []
