import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear, MaxPool1d over features, sum, constant scale."""

    def __init__(self, in_features: int, out_features: int, scale_factor: float):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.scale_factor = scale_factor

    def forward(self, x):
        x = F.max_pool1d(self.fc(x).unsqueeze(1), kernel_size=2).squeeze(1)
        return x.sum(dim=1) * self.scale_factor


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return [4096, 4096, 0.5]


def get_cpu_inputs():
    return [torch.randn(13, 61)]


def get_cpu_init_inputs():
    return [61, 47, 0.5]
