import torch
import torch.nn as nn


class Model(nn.Module):
    """Grouped Conv2d (4 groups)."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, groups=4)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(16, 128, 64, 64)]


def get_init_inputs():
    return [128, 256]


def get_cpu_inputs():
    return [torch.randn(2, 8, 13, 15)]


def get_cpu_init_inputs():
    return [8, 8]
