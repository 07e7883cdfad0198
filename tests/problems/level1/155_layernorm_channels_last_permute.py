import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """LayerNorm over the channels of an NCHW tensor via permute to NHWC and back."""

    def __init__(self, channels: int):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(channels) + 0.5)
        self.bias = nn.Parameter(torch.randn(channels) * 0.1)

    def forward(self, x):
        y = x.permute(0, 2, 3, 1)
        y = F.layer_norm(y, (y.shape[-1],), self.weight, self.bias, eps=1e-6)
        return y.permute(0, 3, 1, 2)


def get_inputs():
    return [torch.randn(32, 64, 128, 128)]


def get_init_inputs():
    return [64]


def get_cpu_inputs():
    return [torch.randn(2, 7, 9, 11)]


def get_cpu_init_inputs():
    return [7]
