import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose3d, add a (C,1,1,1) bias, clamp, mean over space."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.ConvTranspose3d(cin, cout, 3, stride=2, padding=1)
        self.bias = nn.Parameter(torch.randn(cout, 1, 1, 1) * 0.1)

    def forward(self, x):
        x = self.conv(x) + self.bias
        return torch.clamp(x, min=-1.0, max=1.0).mean(dim=(2, 3, 4))


def get_inputs():
    return [torch.randn(8, 32, 32, 64, 64)]


def get_init_inputs():
    return [32, 16]


def get_cpu_inputs():
    return [torch.randn(2, 3, 5, 6, 7)]


def get_cpu_init_inputs():
    return [3, 4]
