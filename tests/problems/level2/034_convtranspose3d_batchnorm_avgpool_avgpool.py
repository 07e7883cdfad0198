import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose3d, BatchNorm3d (eval), two AvgPool3d."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.ConvTranspose3d(cin, cout, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm3d(cout)
        self.pool1 = nn.AvgPool3d(2)
        self.pool2 = nn.AvgPool3d(2)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        return self.pool2(self.pool1(self.bn(self.conv(x))))


def get_inputs():
    return [torch.randn(8, 32, 16, 32, 32)]


def get_init_inputs():
    return [32, 32]


def get_cpu_inputs():
    return [torch.randn(2, 3, 4, 5, 6)]


def get_cpu_init_inputs():
    return [3, 4]
