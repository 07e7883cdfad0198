import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose1d with stride 2 (upsampling by 2)."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.ConvTranspose1d(cin, cout, 4, stride=2, padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(32, 64, 8192)]


def get_init_inputs():
    return [64, 32]


def get_cpu_inputs():
    return [torch.randn(2, 5, 97)]


def get_cpu_init_inputs():
    return [5, 3]
