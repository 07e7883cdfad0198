import torch
import torch.nn as nn


class Model(nn.Module):
    """ResNet basic block: conv-bn-relu-conv-bn, identity residual, ReLU."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        with torch.no_grad():
            for bn in (self.bn1, self.bn2):
                bn.running_mean.uniform_(-0.5, 0.5)
                bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + x)


def get_inputs():
    return [torch.randn(32, 64, 112, 112)]


def get_init_inputs():
    return [64]


def get_cpu_inputs():
    return [torch.randn(2, 4, 11, 13)]


def get_cpu_init_inputs():
    return [4]
