import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear, max_pool1d over features through unsqueeze/squeeze, GELU, row sum."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = self.fc(x)
        x = F.max_pool1d(x.unsqueeze(1), kernel_size=4).squeeze(1)
        return F.gelu(x).sum(dim=1)


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return [4096, 4096]


def get_cpu_inputs():
    return [torch.randn(13, 61)]


def get_cpu_init_inputs():
    return [61, 48]
