import torch
import torch.nn as nn


class Model(nn.Module):
    """Power-average (L2) pooling, kernel 3, stride 2 (nn.LPPool2d)."""

    def __init__(self):
        super().__init__()
        self.pool = nn.LPPool2d(2, 3, stride=2)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(32, 64, 256, 256)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(2, 3, 17, 19)]


def get_cpu_init_inputs():
    return []
