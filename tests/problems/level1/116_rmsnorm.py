import torch
import torch.nn as nn


class Model(nn.Module):
    """RMSNorm over the last dimension with a learned weight."""

    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.RMSNorm(dim, eps=1e-6)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(8, 2048, 4096)]


def get_init_inputs():
    return [4096]


def get_cpu_inputs():
    return [torch.randn(3, 11, 61)]


def get_cpu_init_inputs():
    return [61]
