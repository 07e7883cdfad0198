import torch
import torch.nn as nn


class Model(nn.Module):
    """Embedding lookup, mean over the sequence, Linear, tanh."""

    def __init__(self, vocab: int, dim: int, out_features: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.fc = nn.Linear(dim, out_features)

    def forward(self, idx):
        return torch.tanh(self.fc(self.embed(idx).mean(dim=1)))


def get_inputs():
    return [torch.randint(0, 32768, (1024, 256))]


def get_init_inputs():
    return [32768, 1024, 1024]


def get_cpu_inputs():
    return [torch.randint(0, 97, (3, 11))]


def get_cpu_init_inputs():
    return [97, 29, 13]
