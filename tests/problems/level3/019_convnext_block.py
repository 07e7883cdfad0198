import torch
import torch.nn as nn


class Model(nn.Module):
    """A ConvNeXt block: depthwise 7x7, channels-last LayerNorm, MLP with GELU, layer scale, residual."""

    def __init__(self, c: int):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = nn.LayerNorm(c, eps=1e-6)
        self.pw1 = nn.Linear(c, 4 * c)
        self.act = nn.GELU()
        self.pw2 = nn.Linear(4 * c, c)
        self.gamma = nn.Parameter(torch.full((c,), 0.5))

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.pw2(self.act(self.pw1(self.norm(y))))
        return x + (self.gamma * y).permute(0, 3, 1, 2)


def get_inputs():
    return [torch.randn(16, 96, 56, 56)]


def get_init_inputs():
    return [96]


def get_cpu_inputs():
    return [torch.randn(2, 4, 9, 8)]


def get_cpu_init_inputs():
    return [4]
