import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Mean squared error."""

    def __init__(self):
        super().__init__()

    def forward(self, pred, target):
        return F.mse_loss(pred, target)


def get_inputs():
    return [torch.randn(4096, 8192), torch.randn(4096, 8192)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(37, 53), torch.randn(37, 53)]


def get_cpu_init_inputs():
    return []
