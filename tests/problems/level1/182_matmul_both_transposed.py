import torch
import torch.nn as nn


class Model(nn.Module):
    """A.T @ B.T of two transposed (non-contiguous) operands."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return A.T @ B.T


def get_inputs():
    return [torch.randn(4096, 4096), torch.randn(4096, 4096)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(41, 37), torch.randn(29, 41)]


def get_cpu_init_inputs():
    return []
