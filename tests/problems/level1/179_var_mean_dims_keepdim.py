import torch
import torch.nn as nn


class Model(nn.Module):
    """Biased variance and mean over dims (1, 2), keepdim, as one torch.var_mean call."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        var, mean = torch.var_mean(x, dim=(1, 2), correction=0, keepdim=True)
        return var, mean


def get_inputs():
    return [torch.randn(64, 1024, 2048)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(5, 23, 31)]


def get_cpu_init_inputs():
    return []
