import torch
import torch.nn as nn


class Model(nn.Module):
    """A U-Net decoder stage: transposed-conv upsampling, skip concatenation, two 3x3 conv + BN + ReLU."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.up = nn.ConvTranspose2d(cin, cout, 2, stride=2)
        self.conv = nn.Sequential(
            nn.Conv2d(2 * cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    def forward(self, x, skip):
        return self.conv(torch.cat([self.up(x), skip], dim=1))


def get_inputs():
    return [torch.randn(16, 256, 32, 32), torch.randn(16, 128, 64, 64)]


def get_init_inputs():
    return [256, 128]


def get_cpu_inputs():
    return [torch.randn(2, 6, 3, 4), torch.randn(2, 3, 6, 8)]


def get_cpu_init_inputs():
    return [6, 3]
