import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """EfficientNet MBConv: expand, depthwise 5x5, squeeze-and-excitation gate, project, residual (SiLU, BN)."""

    def __init__(self, c: int, expand: int, se_ratio: int):
        super().__init__()
        h = c * expand
        self.expand = nn.Conv2d(c, h, 1, bias=False)
        self.bn0 = nn.BatchNorm2d(h)
        self.dw = nn.Conv2d(h, h, 5, padding=2, groups=h, bias=False)
        self.bn1 = nn.BatchNorm2d(h)
        self.se_reduce = nn.Conv2d(h, max(1, c // se_ratio), 1)
        self.se_expand = nn.Conv2d(max(1, c // se_ratio), h, 1)
        self.project = nn.Conv2d(h, c, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = F.silu(self.bn0(self.expand(x)))
        y = F.silu(self.bn1(self.dw(y)))
        s = y.mean((2, 3), keepdim=True)
        y = y * torch.sigmoid(self.se_expand(F.silu(self.se_reduce(s))))
        return x + self.bn2(self.project(y))


def get_inputs():
    return [torch.randn(64, 40, 56, 56)]


def get_init_inputs():
    return [40, 6, 4]


def get_cpu_inputs():
    return [torch.randn(2, 4, 7, 8)]


def get_cpu_init_inputs():
    return [4, 3, 2]
