import torch
import torch.nn as nn


class Model(nn.Module):
    """Comparisons combined with logical and/or, cast to float."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return (((x >= 0) & (y < 0.5)) | (x < -2.0)).to(torch.float32)


def get_inputs():
    return [torch.randn(4096, 8192), torch.randn(4096, 8192)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(41, 47), torch.randn(41, 47)]


def get_cpu_init_inputs():
    return []
