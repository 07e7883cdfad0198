import torch
import torch.nn as nn


class Model(nn.Module):
    """A GoogLeNet inception module: 1x1, 1x1-3x3, 1x1-5x5 and pool-1x1 branches concatenated."""

    def __init__(self, c_in: int, c1: int, r3: int, c3: int, r5: int, c5: int, cp: int):
        super().__init__()
        self.b1 = nn.Conv2d(c_in, c1, 1)
        self.b3 = nn.Sequential(nn.Conv2d(c_in, r3, 1), nn.Conv2d(r3, c3, 3, padding=1))
        self.b5 = nn.Sequential(nn.Conv2d(c_in, r5, 1), nn.Conv2d(r5, c5, 5, padding=2))
        self.bp = nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1), nn.Conv2d(c_in, cp, 1))

    def forward(self, x):
        return torch.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(x)], 1)


def get_inputs():
    return [torch.randn(16, 192, 28, 28)]


def get_init_inputs():
    return [192, 64, 96, 128, 16, 32, 32]


def get_cpu_inputs():
    return [torch.randn(2, 6, 5, 7)]


def get_cpu_init_inputs():
    return [6, 3, 4, 5, 2, 3, 2]
