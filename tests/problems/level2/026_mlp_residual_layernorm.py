import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Post-norm MLP block: Linear, GELU, Linear, residual add, LayerNorm."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        return self.norm(self.fc2(F.gelu(self.fc1(x))) + x)


def get_inputs():
    return [torch.randn(8192, 2048)]


def get_init_inputs():
    return [2048, 8192]


def get_cpu_inputs():
    return [torch.randn(13, 37)]


def get_cpu_init_inputs():
    return [37, 53]
