import torch
import torch.nn as nn


class Model(nn.Module):
    """Scale and cast to int32 (truncation toward zero)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return (x * 100.0).to(torch.int32)


def get_inputs():
    return [torch.randn(4096, 8192)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(29, 97)]


def get_cpu_init_inputs():
    return []
