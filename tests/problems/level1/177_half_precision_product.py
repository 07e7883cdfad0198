import torch
import torch.nn as nn


class Model(nn.Module):
    """Product of two inputs in fp16, ReLU, back to fp32."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return (x.half() * y.half()).relu().float()


def get_inputs():
    return [torch.randn(4096, 8192), torch.randn(4096, 8192)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(37, 101), torch.randn(37, 101)]


def get_cpu_init_inputs():
    return []
