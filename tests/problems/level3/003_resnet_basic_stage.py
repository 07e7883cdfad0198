import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + x)


class Model(nn.Module):
    """A ResNet-18/34 stage: two basic blocks (3x3 conv, BN, ReLU, 3x3 conv, BN, residual add, ReLU)."""

    def __init__(self, c: int):
        super().__init__()
        self.blocks = nn.Sequential(Block(c), Block(c))

    def forward(self, x):
        return self.blocks(x)


def get_inputs():
    return [torch.randn(32, 64, 56, 56)]


def get_init_inputs():
    return [64]


def get_cpu_inputs():
    return [torch.randn(2, 4, 7, 6)]


def get_cpu_init_inputs():
    return [4]
