import torch
import torch.nn as nn


class Model(nn.Module):
    """An AlexNet-style front: 11x11/4 conv, ReLU, LRN, max pool, 5x5 conv, LRN, pools and a Linear."""

    def __init__(self, c1: int, c2: int, classes: int):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, c1, 11, stride=4, padding=2), nn.ReLU(inplace=True),
            nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=2.0),
            nn.MaxPool2d(3, 2),
            nn.Conv2d(c1, c2, 5, padding=2), nn.ReLU(inplace=True),
            nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=2.0),
            nn.MaxPool2d(3, 2),
            nn.AdaptiveAvgPool2d((3, 3)),
        )
        self.fc = nn.Linear(c2 * 9, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.net(x), 1))


def get_inputs():
    return [torch.randn(32, 3, 227, 227)]


def get_init_inputs():
    return [96, 256, 1000]


def get_cpu_inputs():
    return [torch.randn(1, 3, 37, 37)]


def get_cpu_init_inputs():
    return [6, 8, 5]
