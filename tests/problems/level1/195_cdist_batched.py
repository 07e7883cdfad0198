import torch
import torch.nn as nn


class Model(nn.Module):
    """Batched pairwise Euclidean distances between two point sets (torch.cdist)."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.cdist(a, b, p=2.0)


def get_inputs():
    return [torch.randn(32, 1024, 256), torch.randn(32, 1024, 256)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(3, 13, 17), torch.randn(3, 11, 17)]


def get_cpu_init_inputs():
    return []
