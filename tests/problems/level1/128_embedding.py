import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.Embedding lookup of token ids."""

    def __init__(self, num_embeddings: int, dim: int):
        super().__init__()
        self.embed = nn.Embedding(num_embeddings, dim)

    def forward(self, idx):
        return self.embed(idx)


def get_inputs():
    return [torch.randint(0, 32768, (64, 1024))]


def get_init_inputs():
    return [32768, 1024]


def get_cpu_inputs():
    return [torch.randint(0, 97, (3, 29))]


def get_cpu_init_inputs():
    return [97, 31]
