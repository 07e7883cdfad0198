import torch
import torch.nn as nn


class Model(nn.Module):
    """A 4-D tensor times a matrix over its last dim, as einsum('bijl,lk->bijk')."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.einsum("bijl,lk->bijk", A, B)


def get_inputs():
    return [torch.randn(16, 128, 256, 256), torch.randn(256, 768)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(2, 3, 5, 17), torch.randn(17, 11)]


def get_cpu_init_inputs():
    return []
