import torch
import torch.nn as nn


class Model(nn.Module):
    """1x1 Conv2d (a per-pixel channel GEMM)."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(16, 256, 64, 64)]


def get_init_inputs():
    return [256, 512]


def get_cpu_inputs():
    return [torch.randn(2, 7, 13, 15)]


def get_cpu_init_inputs():
    return [7, 11]
