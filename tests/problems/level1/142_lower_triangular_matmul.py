import torch
import torch.nn as nn


class Model(nn.Module):
    """Product of two lower-triangular matrices, kept lower triangular."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        A = torch.tril(A)
        B = torch.tril(B)
        return torch.tril(torch.matmul(A, B))


# Square operands: both dims shrink together under the harness's shapes.
def get_inputs():
    return [torch.randn(4096, 4096), torch.randn(4096, 4096)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(41, 41), torch.randn(41, 41)]


def get_cpu_init_inputs():
    return []
