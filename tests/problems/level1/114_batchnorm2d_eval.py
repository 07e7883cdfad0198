import torch
import torch.nn as nn


class Model(nn.Module):
    """BatchNorm2d in eval mode with non-trivial running statistics."""

    def __init__(self, channels: int):
        super().__init__()
        self.norm = nn.BatchNorm2d(channels)
        with torch.no_grad():
            self.norm.running_mean.uniform_(-0.5, 0.5)
            self.norm.running_var.uniform_(0.5, 2.0)
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)
        self.eval()

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(16, 64, 256, 256)]


def get_init_inputs():
    return [64]


def get_cpu_inputs():
    return [torch.randn(2, 6, 17, 19)]


def get_cpu_init_inputs():
    return [6]
