import torch
import torch.nn as nn


class Model(nn.Module):
    """Token embedding, multi-head self-attention, residual, LayerNorm."""

    def __init__(self, vocab: int, dim: int, heads: int):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.mha = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm = nn.LayerNorm(dim)

    def forward(self, tokens):
        h = self.emb(tokens)
        a, _ = self.mha(h, h, h, need_weights=False)
        return self.norm(h + a)


# Token ids are drawn from the lower half of the vocabulary.
def get_inputs():
    return [torch.randint(0, 16384, (16, 1024))]


def get_init_inputs():
    return [32768, 1024, 16]


def get_cpu_inputs():
    return [torch.randint(0, 20, (2, 13))]


def get_cpu_init_inputs():
    return [40, 24, 3]
