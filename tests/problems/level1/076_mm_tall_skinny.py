import torch
import torch.nn as nn


class Model(nn.Module):
    """Tall-skinny matrix multiply: many rows, small K and N."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(65536, 128), torch.randn(128, 512)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(211, 13), torch.randn(13, 19)]


def get_cpu_init_inputs():
    return []
