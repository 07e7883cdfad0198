import torch
import torch.nn as nn


class Model(nn.Module):
    """Cast bf16 to fp32."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.to(torch.float32)


def get_inputs():
    return [torch.randn(8192, 8192, dtype=torch.bfloat16)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(37, 101, dtype=torch.bfloat16)]


def get_cpu_init_inputs():
    return []
