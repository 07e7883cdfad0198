import torch
import torch.nn as nn


class Model(nn.Module):
    """Batched q k^T as einsum('bnd,bmd->bnm')."""

    def __init__(self):
        super().__init__()

    def forward(self, q, k):
        return torch.einsum("bnd,bmd->bnm", q, k)


def get_inputs():
    return [torch.randn(32, 1024, 256), torch.randn(32, 1024, 256)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(3, 13, 17), torch.randn(3, 11, 17)]


def get_cpu_init_inputs():
    return []
