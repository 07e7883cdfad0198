import torch
import torch.nn as nn


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.conv = nn.Sequential(
            nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden),
            nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return x + self.conv(x) if self.use_res else self.conv(x)


class Model(nn.Module):
    """Three MobileNetV2 inverted residuals: 1x1 expand, depthwise 3x3, 1x1 project (one strided)."""

    def __init__(self, cin: int, cout: int, expand: int):
        super().__init__()
        self.blocks = nn.Sequential(InvertedResidual(cin, cout, 2, expand), InvertedResidual(cout, cout, 1, expand),
                                    InvertedResidual(cout, cout, 1, expand))

    def forward(self, x):
        return self.blocks(x)


def get_inputs():
    return [torch.randn(64, 24, 112, 112)]


def get_init_inputs():
    return [24, 32, 6]


def get_cpu_inputs():
    return [torch.randn(2, 3, 9, 8)]


def get_cpu_init_inputs():
    return [3, 4, 2]
