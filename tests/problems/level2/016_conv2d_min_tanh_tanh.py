import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d, minimum over channels (keepdim), tanh twice."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3)

    def forward(self, x):
        x = torch.min(self.conv(x), dim=1, keepdim=True)[0]
        return torch.tanh(torch.tanh(x))


def get_inputs():
    return [torch.randn(32, 32, 256, 256)]


def get_init_inputs():
    return [32, 64]


def get_cpu_inputs():
    return [torch.randn(2, 3, 15, 17)]


def get_cpu_init_inputs():
    return [3, 5]
