import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear, GELU, LayerNorm, all in bf16."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features).to(torch.bfloat16)
        self.norm = nn.LayerNorm(out_features).to(torch.bfloat16)

    def forward(self, x):
        return self.norm(F.gelu(self.fc(x)))


def get_inputs():
    return [torch.randn(8192, 4096, dtype=torch.bfloat16)]


def get_init_inputs():
    return [4096, 8192]


def get_cpu_inputs():
    return [torch.randn(13, 61, dtype=torch.bfloat16)]


def get_cpu_init_inputs():
    return [61, 47]
