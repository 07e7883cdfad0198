import torch
import torch.nn as nn


class Model(nn.Module):
    """Hinge loss mean(clamp(1 - pred * sign(target), min=0))."""

    def __init__(self):
        super().__init__()

    def forward(self, pred, target):
        return torch.clamp(1.0 - pred * torch.sign(target), min=0.0).mean()


def get_inputs():
    return [torch.randn(4096, 8192), torch.randn(4096, 8192)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(37, 53), torch.randn(37, 53)]


def get_cpu_init_inputs():
    return []
