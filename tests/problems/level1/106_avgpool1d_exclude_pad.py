import torch
import torch.nn as nn


class Model(nn.Module):
    """AvgPool1d with padding, not counting the padding."""

    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool1d(5, stride=2, padding=2, count_include_pad=False)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(32, 64, 16384)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(2, 5, 131)]


def get_cpu_init_inputs():
    return []
