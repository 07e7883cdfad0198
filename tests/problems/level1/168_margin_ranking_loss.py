import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Margin ranking loss with +-1 targets from the sign of a third input."""

    def __init__(self):
        super().__init__()

    def forward(self, x1, x2, t):
        y = torch.where(t > 0, 1.0, -1.0)
        return F.margin_ranking_loss(x1, x2, y, margin=0.1)


def get_inputs():
    return [torch.randn(16777216), torch.randn(16777216), torch.randn(16777216)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(997), torch.randn(997), torch.randn(997)]


def get_cpu_init_inputs():
    return []
