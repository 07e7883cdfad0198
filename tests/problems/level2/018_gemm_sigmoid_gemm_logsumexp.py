import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, sigmoid, Linear, logsumexp over features."""

    def __init__(self, in_features: int, hidden: int, out_features: int):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, out_features)

    def forward(self, x):
        return torch.logsumexp(self.fc2(torch.sigmoid(self.fc1(x))), dim=1)


def get_inputs():
    return [torch.randn(8192, 2048)]


def get_init_inputs():
    return [2048, 4096, 1024]


def get_cpu_inputs():
    return [torch.randn(13, 37)]


def get_cpu_init_inputs():
    return [37, 29, 23]
