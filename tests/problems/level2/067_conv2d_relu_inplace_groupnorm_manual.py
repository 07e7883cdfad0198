import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """F.conv2d with parameter weights, in-place ReLU, group norm written out with view, mean and var."""

    def __init__(self, in_channels: int, out_channels: int, groups: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels, 3, 3) * 0.2)
        self.bias = nn.Parameter(torch.randn(out_channels) * 0.1)
        self.gamma = nn.Parameter(torch.rand(out_channels, 1, 1) + 0.5)
        self.beta = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)
        self.groups = groups

    def forward(self, x):
        x = F.conv2d(x, self.weight, self.bias, padding=1)
        x.relu_()
        n, c, h, w = x.shape
        g = x.view(n, self.groups, -1)
        mean = g.mean(dim=-1, keepdim=True)
        var = g.var(dim=-1, unbiased=False, keepdim=True)
        g = (g - mean) / torch.sqrt(var + 1e-5)
        return g.view(n, c, h, w) * self.gamma + self.beta


def get_inputs():
    return [torch.randn(32, 64, 128, 128)]


def get_init_inputs():
    return [64, 128, 8]


def get_cpu_inputs():
    return [torch.randn(2, 3, 11, 13)]


def get_cpu_init_inputs():
    return [3, 8, 2]
