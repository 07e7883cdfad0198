import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, per-feature scale, masked_fill, reverse cumulative sum over features."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.rand(out_features) + 0.5)

    def forward(self, x, mask):
        x = self.fc(x) * self.scale
        x = x.masked_fill(mask, 0.0)
        return x.flip(-1).cumsum(-1).flip(-1)


def get_inputs():
    return [torch.randn(8192, 4096), torch.rand(8192, 4096) < 0.3]


def get_init_inputs():
    return [4096, 4096]


def get_cpu_inputs():
    return [torch.randn(13, 61), torch.rand(13, 47) < 0.3]


def get_cpu_init_inputs():
    return [61, 47]
