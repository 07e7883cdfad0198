import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A ShuffleNet unit: grouped 1x1, channel shuffle, depthwise 3x3, grouped 1x1 (each with BN), residual."""

    def __init__(self, c: int, groups: int):
        super().__init__()
        mid = c // 4
        self.groups = groups
        self.conv1 = nn.Conv2d(c, mid, 1, groups=groups, bias=False)
        self.bn1 = nn.BatchNorm2d(mid)
        self.conv2 = nn.Conv2d(mid, mid, 3, padding=1, groups=mid, bias=False)
        self.bn2 = nn.BatchNorm2d(mid)
        self.conv3 = nn.Conv2d(mid, c, 1, groups=groups, bias=False)
        self.bn3 = nn.BatchNorm2d(c)

    def shuffle(self, x):
        b, c, h, w = x.shape
        x = x.view(b, self.groups, c // self.groups, h, w).transpose(1, 2).contiguous()
        return x.view(b, c, h, w)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(self.shuffle(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + x)


def get_inputs():
    return [torch.randn(128, 240, 28, 28)]


def get_init_inputs():
    return [240, 3]


def get_cpu_inputs():
    return [torch.randn(2, 24, 5, 4)]


def get_cpu_init_inputs():
    return [24, 3]
