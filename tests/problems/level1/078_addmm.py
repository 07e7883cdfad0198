import torch
import torch.nn as nn


class Model(nn.Module):
    """addmm: 0.5 * bias + 2 * (a @ b), the bias a row vector."""

    def __init__(self):
        super().__init__()

    def forward(self, bias, a, b):
        return torch.addmm(bias, a, b, beta=0.5, alpha=2.0)


def get_inputs():
    return [torch.randn(4096), torch.randn(2048, 4096), torch.randn(4096, 4096)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(29), torch.randn(23, 37), torch.randn(37, 29)]


def get_cpu_init_inputs():
    return []
