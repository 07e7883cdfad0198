import torch
import torch.nn as nn


class Model(nn.Module):
    """Bilinear upsampling by 2 with align_corners=False (nn.Upsample)."""

    def __init__(self):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)

    def forward(self, x):
        return self.up(x)


def get_inputs():
    return [torch.randn(32, 64, 128, 128)]


def get_init_inputs():
    return []


def get_cpu_inputs():
    return [torch.randn(2, 3, 13, 17)]


def get_cpu_init_inputs():
    return []
