import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv1d, padded, with bias."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, kernel_size=5, padding=2)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(32, 64, 16384)]


def get_init_inputs():
    return [64, 128]


def get_cpu_inputs():
    return [torch.randn(2, 4, 131)]


def get_cpu_init_inputs():
    return [4, 6]
