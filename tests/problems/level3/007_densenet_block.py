import torch
import torch.nn as nn


class Model(nn.Module):
    """A DenseNet dense block: each layer (BN, ReLU, 3x3 conv) sees the concatenation of all earlier outputs."""

    def __init__(self, layers: int, cin: int, growth: int):
        super().__init__()
        self.layers = nn.ModuleList(
            nn.Sequential(nn.BatchNorm2d(cin + i * growth), nn.ReLU(inplace=True),
                          nn.Conv2d(cin + i * growth, growth, 3, padding=1, bias=False))
            for i in range(layers))

    def forward(self, x):
        feats = [x]
        for layer in self.layers:
            feats.append(layer(torch.cat(feats, 1)))
        return torch.cat(feats, 1)


def get_inputs():
    return [torch.randn(32, 64, 56, 56)]


def get_init_inputs():
    return [4, 64, 32]


def get_cpu_inputs():
    return [torch.randn(2, 4, 6, 7)]


def get_cpu_init_inputs():
    return [3, 4, 3]
