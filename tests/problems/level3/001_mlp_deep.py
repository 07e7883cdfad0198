import torch
import torch.nn as nn


class Model(nn.Module):
    """A deep MLP: Linear + ReLU layers, then a Linear classifier head."""

    def __init__(self, d_in: int, hidden: list, d_out: int):
        super().__init__()
        layers, d = [], d_in
        for h in hidden:
            layers += [nn.Linear(d, h), nn.ReLU()]
            d = h
        layers.append(nn.Linear(d, d_out))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(2048, 1024)]


def get_init_inputs():
    return [1024, [4096, 2048, 1024], 1000]


def get_cpu_inputs():
    return [torch.randn(12, 20)]


def get_cpu_init_inputs():
    return [20, [32, 24, 16], 10]
