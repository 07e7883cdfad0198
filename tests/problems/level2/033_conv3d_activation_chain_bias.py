import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Conv3d, ReLU, LeakyReLU, GELU, sigmoid, a (C,1,1,1) bias."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv3d(cin, cout, 3)
        self.bias = nn.Parameter(torch.randn(cout, 1, 1, 1) * 0.1)

    def forward(self, x):
        x = F.leaky_relu(torch.relu(self.conv(x)), negative_slope=0.01)
        return torch.sigmoid(F.gelu(x)) + self.bias


def get_inputs():
    return [torch.randn(8, 16, 32, 64, 64)]


def get_init_inputs():
    return [16, 32]


def get_cpu_inputs():
    return [torch.randn(2, 3, 5, 7, 9)]


def get_cpu_init_inputs():
    return [3, 4]
