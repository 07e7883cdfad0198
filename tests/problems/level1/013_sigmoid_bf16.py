import torch
import torch.nn as nn


class Model(nn.Module):
    """Sigmoid on bf16."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sigmoid(x)


def get_inputs():
    return [torch.randn(8192, 8192, dtype=torch.bfloat16)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(37, 101, dtype=torch.bfloat16)]


def get_cpu_init_inputs():
    return []
