import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear, scale, x + x, clamp, logsumexp over features, times its own Mish."""

    def __init__(self, in_features: int, out_features: int, scale_factor: float):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.scale_factor = scale_factor

    def forward(self, x):
        x = self.fc(x) * self.scale_factor
        x = torch.clamp(x + x, -10.0, 10.0)
        x = torch.logsumexp(x, dim=1, keepdim=True)
        return x * F.mish(x)


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return [4096, 4096, 2.0]


def get_cpu_inputs():
    return [torch.randn(13, 61)]


def get_cpu_init_inputs():
    return [61, 47, 2.0]
