import torch
import torch.nn as nn


class Model(nn.Module):
    """RMS norm written out on a bf16 input: computed in fp32, cast back, times a bf16 weight."""

    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(dim).to(torch.bfloat16) + 0.5)

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return h.to(x.dtype) * self.weight


def get_inputs():
    return [torch.randn(8192, 4096, dtype=torch.bfloat16)]


def get_init_inputs():
    return [4096]


def get_cpu_inputs():
    return [torch.randn(37, 64, dtype=torch.bfloat16)]


def get_cpu_init_inputs():
    return [64]
