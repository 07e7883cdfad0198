import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """LogSoftmax over the last dimension, bf16."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.log_softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(4096, 16384, dtype=torch.bfloat16)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(29, 131, dtype=torch.bfloat16)]


def get_cpu_init_inputs():
    return []
