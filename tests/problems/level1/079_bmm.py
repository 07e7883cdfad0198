import torch
import torch.nn as nn


class Model(nn.Module):
    """Batched matrix multiply."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.bmm(a, b)


def get_inputs():
    return [torch.randn(32, 1024, 512), torch.randn(32, 512, 1024)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(3, 17, 23), torch.randn(3, 23, 19)]


def get_cpu_init_inputs():
    return []
