import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d, BatchNorm2d (eval), a (C,1,1) scale, tanh."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.bn = nn.BatchNorm2d(cout)
        self.scale = nn.Parameter(torch.rand(cout, 1, 1) + 0.5)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        return torch.tanh(self.bn(self.conv(x)) * self.scale)


def get_inputs():
    return [torch.randn(32, 32, 256, 256)]


def get_init_inputs():
    return [32, 32]


def get_cpu_inputs():
    return [torch.randn(2, 3, 15, 17)]


def get_cpu_init_inputs():
    return [3, 4]
