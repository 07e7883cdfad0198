"""relu(A @ B): a GEMM with an activation epilogue."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.relu(torch.matmul(a, b))


def get_inputs():
    return [torch.randn(2048, 1024), torch.randn(1024, 2048)]


def get_cpu_inputs():
    return [torch.randn(96, 64), torch.randn(64, 80)]


def get_init_inputs():
    return []
