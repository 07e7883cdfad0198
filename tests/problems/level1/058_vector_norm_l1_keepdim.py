import torch
import torch.nn as nn


class Model(nn.Module):
    """L1 vector norm over dimensions 1 and 2, keepdim."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.linalg.vector_norm(x, ord=1, dim=(1, 2), keepdim=True)


def get_inputs():
    return [torch.randn(16, 2048, 1024)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(3, 31, 37)]


def get_cpu_init_inputs():
    return []
