import torch
import torch.nn as nn


class Model(nn.Module):
    """LayerNorm in bf16 (bf16 input and parameters)."""

    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim).to(torch.bfloat16)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(8192, 4096, dtype=torch.bfloat16)]


def get_init_inputs():
    return [4096]


def get_cpu_inputs():
    return [torch.randn(37, 101, dtype=torch.bfloat16)]


def get_cpu_init_inputs():
    return [101]
