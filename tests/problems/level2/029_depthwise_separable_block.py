import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Depthwise 3x3 conv, BN, ReLU6, pointwise 1x1 conv, BN (MobileNet-style)."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.dw = nn.Conv2d(cin, cin, 3, padding=1, groups=cin, bias=False)
        self.bn1 = nn.BatchNorm2d(cin)
        self.pw = nn.Conv2d(cin, cout, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        with torch.no_grad():
            for bn in (self.bn1, self.bn2):
                bn.running_mean.uniform_(-0.5, 0.5)
                bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        x = F.relu6(self.bn1(self.dw(x)))
        return self.bn2(self.pw(x))


def get_inputs():
    return [torch.randn(32, 128, 112, 112)]


def get_init_inputs():
    return [128, 256]


def get_cpu_inputs():
    return [torch.randn(2, 6, 13, 15)]


def get_cpu_init_inputs():
    return [6, 10]
