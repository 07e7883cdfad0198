"""RMSNorm over the last dimension with a learned weight (nn.RMSNorm)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.RMSNorm(dim, eps=1e-6)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(8, 1024, 4096)]


def get_cpu_inputs():
    return [torch.randn(3, 7, 320)]


def get_init_inputs():
    return [4096]


def get_cpu_init_inputs():
    return [320]
