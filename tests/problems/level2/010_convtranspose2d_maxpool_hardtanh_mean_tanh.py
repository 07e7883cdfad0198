import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """ConvTranspose2d, MaxPool2d, Hardtanh, spatial mean, tanh."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.ConvTranspose2d(cin, cout, 4, stride=2, padding=1)
        self.pool = nn.MaxPool2d(2, stride=2)

    def forward(self, x):
        x = F.hardtanh(self.pool(self.conv(x)), min_val=-1.0, max_val=1.0)
        return torch.tanh(x.mean(dim=(2, 3), keepdim=True))


def get_inputs():
    return [torch.randn(32, 64, 128, 128)]


def get_init_inputs():
    return [64, 64]


def get_cpu_inputs():
    return [torch.randn(2, 4, 9, 11)]


def get_cpu_init_inputs():
    return [4, 6]
