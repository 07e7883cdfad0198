import torch
import torch.nn as nn


class Model(nn.Module):
    """Adaptive max pooling of an NCHW tensor to 5 x 7."""

    def __init__(self):
        super().__init__()
        self.pool = nn.AdaptiveMaxPool2d((5, 7))

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(32, 64, 256, 256)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(2, 3, 23, 29)]


def get_cpu_init_inputs():
    return []
