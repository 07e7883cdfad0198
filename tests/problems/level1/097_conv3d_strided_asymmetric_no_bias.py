import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv3d with a (3,5,5) kernel, stride (1,2,2), no bias."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv3d(cin, cout, (3, 5, 5), stride=(1, 2, 2), padding=(1, 2, 2), bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(4, 16, 32, 128, 128)]


def get_init_inputs():
    return [16, 32]


def get_cpu_inputs():
    return [torch.randn(2, 3, 5, 9, 13)]


def get_cpu_init_inputs():
    return [3, 4]
