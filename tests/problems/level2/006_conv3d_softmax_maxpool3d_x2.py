import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv3d, softmax over channels, two MaxPool3d."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv3d(cin, cout, 3)
        self.pool1 = nn.MaxPool3d(2)
        self.pool2 = nn.MaxPool3d(2)

    def forward(self, x):
        return self.pool2(self.pool1(torch.softmax(self.conv(x), dim=1)))


def get_inputs():
    return [torch.randn(16, 16, 32, 128, 128)]


def get_init_inputs():
    return [16, 32]


def get_cpu_inputs():
    return [torch.randn(2, 3, 7, 9, 10)]


def get_cpu_init_inputs():
    return [3, 5]
