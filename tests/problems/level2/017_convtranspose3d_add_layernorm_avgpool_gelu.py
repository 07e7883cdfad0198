import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """ConvTranspose3d, add a learned scalar, LayerNorm over channels, AvgPool3d, GELU."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.ConvTranspose3d(cin, cout, 3, stride=2, padding=1, output_padding=1)
        self.sum_weight = nn.Parameter(torch.tensor([1.0]))
        self.norm = nn.LayerNorm(cout)
        self.pool = nn.AvgPool3d(2)

    def forward(self, x):
        x = self.conv(x) + self.sum_weight
        x = self.norm(x.permute(0, 2, 3, 4, 1)).permute(0, 4, 1, 2, 3)
        return F.gelu(self.pool(x))


def get_inputs():
    return [torch.randn(16, 32, 16, 32, 32)]


def get_init_inputs():
    return [32, 16]


def get_cpu_inputs():
    return [torch.randn(2, 3, 3, 4, 5)]


def get_cpu_init_inputs():
    return [3, 4]
