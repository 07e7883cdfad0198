import torch
import torch.nn as nn


class Model(nn.Module):
    """scatter_add along dim 1: each row adds its J source values at the columns its index names."""

    def forward(self, x, index, src):
        return x.scatter_add(1, index % x.shape[1], src)


def get_inputs():
    return [torch.randn(16384, 1024), torch.randint(0, 1024, (16384, 64)), torch.randn(16384, 64)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(13, 37), torch.randint(0, 37, (13, 11)), torch.randn(13, 11)]


def get_cpu_init_inputs():
    return []
