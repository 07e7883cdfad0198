import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose2d, softmax over channels, a (C,1,1) bias, a constant scale, sigmoid."""

    def __init__(self, cin: int, cout: int, scaling_factor: float):
        super().__init__()
        self.conv = nn.ConvTranspose2d(cin, cout, 3, stride=2, padding=1, output_padding=1)
        self.bias = nn.Parameter(torch.randn(cout, 1, 1) * 0.1)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = torch.softmax(self.conv(x), dim=1) + self.bias
        return torch.sigmoid(x * self.scaling_factor)


def get_inputs():
    return [torch.randn(16, 64, 128, 128)]


def get_init_inputs():
    return [64, 64, 2.0]


def get_cpu_inputs():
    return [torch.randn(2, 4, 9, 11)]


def get_cpu_init_inputs():
    return [4, 5, 2.0]
