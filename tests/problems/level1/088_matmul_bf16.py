import torch
import torch.nn as nn


class Model(nn.Module):
    """Square matrix multiply in bf16."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(8192, 8192, dtype=torch.bfloat16), torch.randn(8192, 8192, dtype=torch.bfloat16)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(37, 41, dtype=torch.bfloat16), torch.randn(41, 29, dtype=torch.bfloat16)]


def get_cpu_init_inputs():
    return []
