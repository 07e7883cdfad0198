import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear, logsumexp over features, LeakyReLU twice, GELU twice."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = torch.logsumexp(self.fc(x), dim=1, keepdim=True)
        x = F.leaky_relu(x, 0.01)
        x = F.leaky_relu(x, 0.01)
        x = F.gelu(x)
        return F.gelu(x)


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return [4096, 4096]


def get_cpu_inputs():
    return [torch.randn(13, 61)]


def get_cpu_init_inputs():
    return [61, 47]
