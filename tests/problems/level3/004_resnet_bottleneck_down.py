import torch
import torch.nn as nn


class Model(nn.Module):
    """A ResNet-50 downsampling bottleneck: 1x1, strided 3x3, 1x1 convs with BN, strided 1x1 shortcut, ReLU."""

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, width * 4, 1, bias=False), nn.BatchNorm2d(width * 4))
        self.shortcut = nn.Sequential(nn.Conv2d(cin, width * 4, 1, stride, bias=False), nn.BatchNorm2d(width * 4))
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.body(x) + self.shortcut(x))


def get_inputs():
    return [torch.randn(32, 256, 56, 56)]


def get_init_inputs():
    return [256, 128, 2]


def get_cpu_inputs():
    return [torch.randn(2, 8, 9, 8)]


def get_cpu_init_inputs():
    return [8, 4, 2]
