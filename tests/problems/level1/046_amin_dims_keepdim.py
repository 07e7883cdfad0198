import torch
import torch.nn as nn


class Model(nn.Module):
    """amin over the two spatial dimensions, keepdim."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.amin(x, dim=(2, 3), keepdim=True)


def get_inputs():
    return [torch.randn(16, 512, 64, 64)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(2, 9, 13, 15)]


def get_cpu_init_inputs():
    return []
