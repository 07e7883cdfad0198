import torch
import torch.nn as nn


class Model(nn.Module):
    """Each row sorted in descending order."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        values, _ = torch.sort(x, dim=-1, descending=True)
        return values


def get_inputs():
    return [torch.randn(4096, 8192)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(37, 101)]


def get_cpu_init_inputs():
    return []
