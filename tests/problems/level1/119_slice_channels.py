import torch
import torch.nn as nn


class Model(nn.Module):
    """x[:, 1:5]: a channel slice, made contiguous."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x[:, 1:5].contiguous()


def get_inputs():
    return [torch.randn(64, 16, 512, 512)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(2, 9, 13, 15)]


def get_cpu_init_inputs():
    return []
