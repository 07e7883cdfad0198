import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """ConvTranspose2d, add a constant, min with 0, GELU, multiply."""

    def __init__(self, cin: int, cout: int, add_value: float, multiply_value: float):
        super().__init__()
        self.conv = nn.ConvTranspose2d(cin, cout, 4, stride=2, padding=1)
        self.add_value = add_value
        self.multiply_value = multiply_value

    def forward(self, x):
        x = torch.clamp(self.conv(x) + self.add_value, max=0.0)
        return F.gelu(x) * self.multiply_value


def get_inputs():
    return [torch.randn(32, 64, 128, 128)]


def get_init_inputs():
    return [64, 32, 0.5, 2.0]


def get_cpu_inputs():
    return [torch.randn(2, 4, 9, 11)]


def get_cpu_init_inputs():
    return [4, 3, 0.5, 2.0]
