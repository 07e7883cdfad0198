import torch
import torch.nn as nn


class Model(nn.Module):
    """BatchNorm1d in eval mode on (N, C, L) with non-trivial running statistics."""

    def __init__(self, channels: int):
        super().__init__()
        self.bn = nn.BatchNorm1d(channels)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1.0, 1.0)
            self.bn.running_var.uniform_(0.5, 2.0)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.bn(x)


def get_inputs():
    return [torch.randn(64, 256, 4096)]


def get_init_inputs():
    return [256]


def get_cpu_inputs():
    return [torch.randn(3, 17, 41)]


def get_cpu_init_inputs():
    return [17]
