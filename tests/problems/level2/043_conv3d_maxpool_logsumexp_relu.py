import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv3d, MaxPool3d, logsumexp over channels (keepdim), ReLU."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv3d(cin, cout, 3, padding=1)
        self.pool = nn.MaxPool3d(2)

    def forward(self, x):
        return torch.relu(torch.logsumexp(self.pool(self.conv(x)), dim=1, keepdim=True))


def get_inputs():
    return [torch.randn(8, 16, 32, 64, 64)]


def get_init_inputs():
    return [16, 32]


def get_cpu_inputs():
    return [torch.randn(2, 3, 5, 7, 9)]


def get_cpu_init_inputs():
    return [3, 4]
