import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d, AvgPool2d, sigmoid, sum over all but the batch."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3)
        self.pool = nn.AvgPool2d(2)

    def forward(self, x):
        return torch.sigmoid(self.pool(self.conv(x))).sum(dim=(1, 2, 3))


def get_inputs():
    return [torch.randn(32, 32, 256, 256)]


def get_init_inputs():
    return [32, 32]


def get_cpu_inputs():
    return [torch.randn(2, 3, 15, 17)]


def get_cpu_init_inputs():
    return [3, 4]
