import torch
import torch.nn as nn


class Model(nn.Module):
    """A VGG-style net: two stages of two 3x3 conv + ReLU and a max pool, then a two-layer MLP classifier."""

    def __init__(self, c_in: int, width: int, hw: int, classes: int):
        super().__init__()
        w2 = 2 * width
        self.features = nn.Sequential(
            nn.Conv2d(c_in, width, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(width, width, 3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(2, 2),
            nn.Conv2d(width, w2, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(w2, w2, 3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(2, 2),
        )
        flat = w2 * (hw // 4) * (hw // 4)
        self.classifier = nn.Sequential(
            nn.Linear(flat, 4 * width), nn.ReLU(inplace=True), nn.Dropout(0.0), nn.Linear(4 * width, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def get_inputs():
    return [torch.randn(16, 3, 64, 64)]


def get_init_inputs():
    return [3, 64, 64, 100]


def get_cpu_inputs():
    return [torch.randn(2, 3, 8, 8)]


def get_cpu_init_inputs():
    return [3, 4, 8, 5]
