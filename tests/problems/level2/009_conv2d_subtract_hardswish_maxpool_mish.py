import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Conv2d, subtract a constant, Hardswish, MaxPool2d, Mish."""

    def __init__(self, cin: int, cout: int, subtract_value: float):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3)
        self.subtract_value = subtract_value
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        x = F.hardswish(self.conv(x) - self.subtract_value)
        return F.mish(self.pool(x))


def get_inputs():
    return [torch.randn(32, 32, 256, 256)]


def get_init_inputs():
    return [32, 32, 0.5]


def get_cpu_inputs():
    return [torch.randn(2, 3, 15, 17)]


def get_cpu_init_inputs():
    return [3, 4, 0.5]
