import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """LeNet-5: two conv + ReLU + max-pool stages, then three fully connected layers."""

    def __init__(self, image: int, c1: int, c2: int, f1: int, f2: int, classes: int):
        super().__init__()
        self.conv1 = nn.Conv2d(1, c1, 5)
        self.conv2 = nn.Conv2d(c1, c2, 5)
        side = ((image - 4) // 2 - 4) // 2
        self.fc1 = nn.Linear(c2 * side * side, f1)
        self.fc2 = nn.Linear(f1, f2)
        self.fc3 = nn.Linear(f2, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.flatten(1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def get_inputs():
    return [torch.randn(8192, 1, 32, 32)]


def get_init_inputs():
    return [32, 6, 16, 120, 84, 10]


def get_cpu_inputs():
    return [torch.randn(3, 1, 20, 20)]


def get_cpu_init_inputs():
    return [20, 3, 4, 12, 8, 5]
