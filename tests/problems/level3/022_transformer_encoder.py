import torch
import torch.nn as nn


class Model(nn.Module):
    """Two nn.TransformerEncoderLayer (pre-norm, GELU, batch first, eval: no dropout) and a mean-pooled Linear head."""

    def __init__(self, d: int, heads: int, ffn: int, classes: int):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, heads, ffn, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        return self.head(self.enc(x).mean(dim=1))


def get_inputs():
    return [torch.randn(16, 256, 512)]


def get_init_inputs():
    return [512, 8, 2048, 10]


def get_cpu_inputs():
    return [torch.randn(2, 5, 8)]


def get_cpu_init_inputs():
    return [8, 2, 16, 3]
