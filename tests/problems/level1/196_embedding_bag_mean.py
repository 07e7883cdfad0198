import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.EmbeddingBag (mean) over fixed-size bags given as a 2-D int64 index tensor."""

    def __init__(self, num_embeddings: int, dim: int):
        super().__init__()
        self.bag = nn.EmbeddingBag(num_embeddings, dim, mode="mean")

    def forward(self, idx):
        return self.bag(idx)


# Index inputs are drawn from the lower half of the table, so that a harness which shrinks
# sizes for its test shapes keeps them in range.
def get_inputs():
    return [torch.randint(0, 32768, (4096, 64))]


def get_init_inputs():
    return [65536, 512]


def get_cpu_inputs():
    return [torch.randint(0, 20, (5, 7))]


def get_cpu_init_inputs():
    return [40, 24]
