import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """ELU with a constructor-given alpha."""

    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return F.elu(x, alpha=self.alpha)


def get_inputs():
    return [torch.randn(4096, 8192)]


def get_init_inputs():
    return [1.3]


def get_cpu_inputs():
    return [torch.randn(29, 131)]


def get_cpu_init_inputs():
    return [1.3]
