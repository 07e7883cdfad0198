import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose2d, spatial mean, (C,1,1) bias, logsumexp over channels, sum, times 10."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.ConvTranspose2d(cin, cout, 3)
        self.bias = nn.Parameter(torch.randn(cout, 1, 1))

    def forward(self, x):
        x = self.conv(x).mean(dim=(2, 3), keepdim=True) + self.bias
        return torch.logsumexp(x, dim=1, keepdim=True).sum(dim=(2, 3)) * 10.0


def get_inputs():
    return [torch.randn(32, 64, 128, 128)]


def get_init_inputs():
    return [64, 64]


def get_cpu_inputs():
    return [torch.randn(2, 4, 9, 11)]


def get_cpu_init_inputs():
    return [4, 6]
