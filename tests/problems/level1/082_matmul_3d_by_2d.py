import torch
import torch.nn as nn


class Model(nn.Module):
    """3-D tensor times a 2-D matrix (batch of rows against one weight)."""

    def __init__(self):
        super().__init__()

    def forward(self, x, w):
        return x @ w


def get_inputs():
    return [torch.randn(16, 1024, 1024), torch.randn(1024, 2048)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(3, 13, 31), torch.randn(31, 17)]


def get_cpu_init_inputs():
    return []
