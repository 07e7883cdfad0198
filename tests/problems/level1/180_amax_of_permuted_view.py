import torch
import torch.nn as nn


class Model(nn.Module):
    """amax over the middle dim of a permuted (non-contiguous) view, keepdim."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.permute(2, 0, 1).amax(dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(64, 1024, 2048)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(5, 23, 31)]


def get_cpu_init_inputs():
    return []
