import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """MaxPool3d 2x2x2 with ceil_mode on odd sizes."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.max_pool3d(x, 2, stride=2, ceil_mode=True)


def get_inputs():
    return [torch.randn(8, 32, 63, 63, 63)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(2, 2, 7, 11, 13)]


def get_cpu_init_inputs():
    return []
