import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A SqueezeNet fire module: 1x1 squeeze + ReLU, then 1x1 and 3x3 expand convs + ReLU, concatenated."""

    def __init__(self, cin: int, squeeze: int, e1: int, e3: int):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.e1 = nn.Conv2d(squeeze, e1, 1)
        self.e3 = nn.Conv2d(squeeze, e3, 3, padding=1)

    def forward(self, x):
        s = F.relu(self.squeeze(x))
        return torch.cat([F.relu(self.e1(s)), F.relu(self.e3(s))], dim=1)


def get_inputs():
    return [torch.randn(64, 256, 55, 55)]


def get_init_inputs():
    return [256, 32, 128, 128]


def get_cpu_inputs():
    return [torch.randn(2, 6, 7, 7)]


def get_cpu_init_inputs():
    return [6, 3, 4, 4]
