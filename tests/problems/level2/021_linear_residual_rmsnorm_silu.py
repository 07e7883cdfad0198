import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Residual Linear, RMSNorm, SiLU."""

    def __init__(self, dim: int):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.norm = nn.RMSNorm(dim)

    def forward(self, x):
        return F.silu(self.norm(x + self.fc(x)))


def get_inputs():
    return [torch.randn(8, 2048, 2048)]


def get_init_inputs():
    return [2048]


def get_cpu_inputs():
    return [torch.randn(2, 7, 37)]


def get_cpu_init_inputs():
    return [37]
