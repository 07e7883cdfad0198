import torch
import torch.nn as nn


class Model(nn.Module):
    """RReLU in eval mode (a leaky ReLU of the mean slope), nn.RReLU."""

    def __init__(self):
        super().__init__()
        self.act = nn.RReLU(0.1, 0.3)

    def forward(self, x):
        return self.act(x)


def get_inputs():
    return [torch.randn(4096, 8192)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(37, 101)]


def get_cpu_init_inputs():
    return []
