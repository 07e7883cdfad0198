import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose2d with stride 2, padding 1 and output_padding 1."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.ConvTranspose2d(cin, cout, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(16, 64, 128, 128)]


def get_init_inputs():
    return [64, 32]


def get_cpu_inputs():
    return [torch.randn(2, 4, 13, 17)]


def get_cpu_init_inputs():
    return [4, 3]
