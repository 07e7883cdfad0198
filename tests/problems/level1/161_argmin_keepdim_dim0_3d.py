import torch
import torch.nn as nn


class Model(nn.Module):
    """argmin over dim 0 of a 3-D tensor, keepdim, as a tensor method."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.argmin(dim=0, keepdim=True)


def get_inputs():
    return [torch.randn(256, 512, 1024)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(7, 23, 19)]


def get_cpu_init_inputs():
    return []
