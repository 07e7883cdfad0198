import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose3d with stride 2 and output_padding 1."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.ConvTranspose3d(cin, cout, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(4, 32, 32, 64, 64)]


def get_init_inputs():
    return [32, 16]


def get_cpu_inputs():
    return [torch.randn(2, 3, 5, 7, 9)]


def get_cpu_init_inputs():
    return [3, 2]
