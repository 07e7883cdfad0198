import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear, ReLU6 (functional, in place), L1 normalization of each row."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = F.relu6(self.fc(x), inplace=True)
        return F.normalize(x, p=1.0, dim=-1, eps=1e-6)


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return [4096, 4096]


def get_cpu_inputs():
    return [torch.randn(13, 61)]


def get_cpu_init_inputs():
    return [61, 47]
