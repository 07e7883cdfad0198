import torch
import torch.nn as nn


class Model(nn.Module):
    """PReLU with one learned slope per channel on an NCHW input."""

    def __init__(self, channels: int):
        super().__init__()
        self.act = nn.PReLU(num_parameters=channels, init=0.1)
        with torch.no_grad():
            self.act.weight.add_(torch.rand(channels) * 0.3)

    def forward(self, x):
        return self.act(x)


def get_inputs():
    return [torch.randn(32, 64, 128, 128)]


def get_init_inputs():
    return [64]


def get_cpu_inputs():
    return [torch.randn(2, 7, 9, 11)]


def get_cpu_init_inputs():
    return [7]
