import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A ResNeXt bottleneck with a grouped strided 3x3 and a strided 1x1 projection shortcut, with BN."""

    def __init__(self, c_in: int, width: int, c_out: int, groups: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=2, padding=1, groups=groups, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, c_out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c_out)
        self.short = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=2, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + self.short(x))


def get_inputs():
    return [torch.randn(16, 256, 56, 56)]


def get_init_inputs():
    return [256, 256, 512, 32]


def get_cpu_inputs():
    return [torch.randn(2, 8, 6, 7)]


def get_cpu_init_inputs():
    return [8, 8, 12, 4]
