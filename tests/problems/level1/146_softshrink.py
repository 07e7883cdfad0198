import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Soft shrinkage with lambda 0.5 (F.softshrink)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.softshrink(x, lambd=0.5)


def get_inputs():
    return [torch.randn(4096, 8192)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(37, 101)]


def get_cpu_init_inputs():
    return []
