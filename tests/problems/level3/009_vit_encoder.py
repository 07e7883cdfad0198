import torch
import torch.nn as nn


class Model(nn.Module):
    """A ViT front: patch conv, class token, position embedding, two pre-norm encoder layers, final LayerNorm."""

    def __init__(self, image: int, patch: int, d: int, heads: int, layers: int):
        super().__init__()
        n = (image // patch) ** 2
        self.embed = nn.Conv2d(3, d, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, n + 1, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        t = self.embed(x).flatten(2).transpose(1, 2)
        t = torch.cat([self.cls.expand(x.shape[0], -1, -1), t], dim=1) + self.pos
        return self.norm(self.encoder(t)[:, 0])


def get_inputs():
    return [torch.randn(64, 3, 224, 224)]


def get_init_inputs():
    return [224, 16, 384, 6, 2]


def get_cpu_inputs():
    return [torch.randn(2, 3, 8, 8)]


def get_cpu_init_inputs():
    return [8, 4, 16, 2, 2]
