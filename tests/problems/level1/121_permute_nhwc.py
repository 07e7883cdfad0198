import torch
import torch.nn as nn


class Model(nn.Module):
    """NCHW to NHWC: permute, then contiguous."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.permute(0, 2, 3, 1).contiguous()


def get_inputs():
    return [torch.randn(16, 64, 256, 256)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(2, 7, 13, 17)]


def get_cpu_init_inputs():
    return []
