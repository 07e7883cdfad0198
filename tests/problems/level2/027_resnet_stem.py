import torch
import torch.nn as nn


class Model(nn.Module):
    """ResNet stem: 7x7/2 Conv2d without bias, BatchNorm2d (eval), ReLU, 3x3/2 MaxPool2d."""

    def __init__(self, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(3, cout, 7, stride=2, padding=3, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        return self.pool(torch.relu(self.bn(self.conv(x))))


def get_inputs():
    return [torch.randn(64, 3, 224, 224)]


def get_init_inputs():
    return [64]


def get_cpu_inputs():
    return [torch.randn(2, 3, 23, 29)]


def get_cpu_init_inputs():
    return [8]
