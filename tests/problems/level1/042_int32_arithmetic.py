import torch
import torch.nn as nn


class Model(nn.Module):
    """Integer arithmetic on int32 tensors: (a + b) * 3 - a // 7."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return (a + b) * 3 - a // 7


def get_inputs():
    return [
        torch.randint(0, 1000, (4096, 8192), dtype=torch.int32),
        torch.randint(0, 1000, (4096, 8192), dtype=torch.int32),
    ]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randint(0, 1000, (37, 101), dtype=torch.int32), torch.randint(0, 1000, (37, 101), dtype=torch.int32)]


def get_cpu_init_inputs():
    return []
