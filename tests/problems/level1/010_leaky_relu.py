import torch
import torch.nn as nn


class Model(nn.Module):
    """LeakyReLU with a constructor-given slope."""

    def __init__(self, negative_slope: float):
        super().__init__()
        self.act = nn.LeakyReLU(negative_slope)

    def forward(self, x):
        return self.act(x)


def get_inputs():
    return [torch.randn(4096, 8192)]


def get_init_inputs():
    return [0.05]


def get_cpu_inputs():
    return [torch.randn(43, 89)]


def get_cpu_init_inputs():
    return [0.05]
