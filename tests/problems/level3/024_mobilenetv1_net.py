import torch
import torch.nn as nn


def dw_sep(c_in, c_out, stride):
    return nn.Sequential(
        nn.Conv2d(c_in, c_in, 3, stride, 1, groups=c_in, bias=False), nn.BatchNorm2d(c_in), nn.ReLU(inplace=True),
        nn.Conv2d(c_in, c_out, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True))


class Model(nn.Module):
    """A small MobileNetV1: strided stem, four depthwise-separable blocks, global average pool, Linear."""

    def __init__(self, width: int, classes: int):
        super().__init__()
        w = width
        self.body = nn.Sequential(
            nn.Conv2d(3, w, 3, 2, 1, bias=False), nn.BatchNorm2d(w), nn.ReLU(inplace=True),
            dw_sep(w, 2 * w, 1), dw_sep(2 * w, 4 * w, 2), dw_sep(4 * w, 4 * w, 1), dw_sep(4 * w, 8 * w, 2))
        self.fc = nn.Linear(8 * w, classes)

    def forward(self, x):
        y = self.body(x)
        return self.fc(y.mean(dim=(2, 3)))


def get_inputs():
    return [torch.randn(32, 3, 128, 128)]


def get_init_inputs():
    return [32, 1000]


def get_cpu_inputs():
    return [torch.randn(2, 3, 16, 14)]


def get_cpu_init_inputs():
    return [2, 5]
