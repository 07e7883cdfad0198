import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv1d, ReLU, AdaptiveMaxPool1d, flatten, Linear classifier."""

    def __init__(self, cin: int, cout: int, pooled: int, classes: int):
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, 5)
        self.pool = nn.AdaptiveMaxPool1d(pooled)
        self.fc = nn.Linear(cout * pooled, classes)

    def forward(self, x):
        x = self.pool(torch.relu(self.conv(x)))
        return self.fc(x.flatten(1))


def get_inputs():
    return [torch.randn(256, 64, 4096)]


def get_init_inputs():
    return [64, 128, 16, 1000]


def get_cpu_inputs():
    return [torch.randn(2, 3, 67)]


def get_cpu_init_inputs():
    return [3, 5, 4, 7]
