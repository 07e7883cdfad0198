import torch
import torch.nn as nn


class Model(nn.Module):
    """CELU with alpha 0.7 (nn.CELU)."""

    def __init__(self, alpha: float):
        super().__init__()
        self.act = nn.CELU(alpha=alpha)

    def forward(self, x):
        return self.act(x)


def get_inputs():
    return [torch.randn(4096, 8192)]


def get_init_inputs():
    return [0.7]


def get_cpu_inputs():
    return [torch.randn(37, 101)]


def get_cpu_init_inputs():
    return [0.7]
