import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Hardtanh with asymmetric bounds."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.hardtanh(x, min_val=-1.5, max_val=2.0)


def get_inputs():
    return [torch.randn(4096, 8192)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(59, 61)]


def get_cpu_init_inputs():
    return []
