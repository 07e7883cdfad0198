import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Conv1d, GroupNorm, GELU, AvgPool1d."""

    def __init__(self, cin: int, cout: int, groups: int):
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, 3, padding=1)
        self.norm = nn.GroupNorm(groups, cout)
        self.pool = nn.AvgPool1d(2)

    def forward(self, x):
        return self.pool(F.gelu(self.norm(self.conv(x))))


def get_inputs():
    return [torch.randn(64, 64, 8192)]


def get_init_inputs():
    return [64, 128, 8]


def get_cpu_inputs():
    return [torch.randn(2, 5, 61)]


def get_cpu_init_inputs():
    return [5, 8, 4]
