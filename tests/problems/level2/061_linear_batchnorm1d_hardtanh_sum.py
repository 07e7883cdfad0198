import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear, BatchNorm1d (eval), hardtanh, sum over features with keepdim."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.2, 0.2)
            self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        x = self.fc(x)
        x = self.bn(x)
        x = F.hardtanh(x, min_val=-0.5, max_val=0.5)
        return torch.sum(x, dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return [4096, 4096]


def get_cpu_inputs():
    return [torch.randn(13, 61)]


def get_cpu_init_inputs():
    return [61, 47]
