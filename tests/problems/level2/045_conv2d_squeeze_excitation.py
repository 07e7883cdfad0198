import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d, then squeeze-and-excitation: pool, Linear, ReLU, Linear, sigmoid, rescale."""

    def __init__(self, cin: int, cout: int, reduced: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.fc1 = nn.Linear(cout, reduced)
        self.fc2 = nn.Linear(reduced, cout)

    def forward(self, x):
        y = self.conv(x)
        s = torch.sigmoid(self.fc2(torch.relu(self.fc1(y.mean(dim=(2, 3))))))
        return y * s[:, :, None, None]


def get_inputs():
    return [torch.randn(32, 64, 128, 128)]


def get_init_inputs():
    return [64, 128, 16]


def get_cpu_inputs():
    return [torch.randn(2, 3, 15, 17)]


def get_cpu_init_inputs():
    return [3, 8, 2]
