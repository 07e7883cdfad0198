import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Pre-norm MLP block: LayerNorm, Linear, GELU, Linear, residual add."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


def get_inputs():
    return [torch.randn(8, 1024, 2048)]


def get_init_inputs():
    return [2048, 8192]


def get_cpu_inputs():
    return [torch.randn(2, 7, 37)]


def get_cpu_init_inputs():
    return [37, 53]
