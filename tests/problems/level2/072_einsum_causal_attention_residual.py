import torch
import torch.nn as nn


class Model(nn.Module):
    """Attention by einsum with a causal boolean-mask buffer (masked_fill -inf), softmax, plus the query."""

    def __init__(self, seq: int):
        super().__init__()
        self.register_buffer("causal", torch.ones(seq, seq, dtype=torch.bool).tril())

    def forward(self, q, k, v):
        s = torch.einsum("bqd,bkd->bqk", q, k) / (q.shape[-1] ** 0.5)
        s = s.masked_fill(~self.causal, float("-inf"))
        p = s.softmax(dim=-1)
        return torch.einsum("bqk,bkd->bqd", p, v) + q


# The mask buffer fixes the sequence length, so the harness keeps it.
def get_inputs():
    return [torch.randn(128, 1024, 64), torch.randn(128, 1024, 64), torch.randn(128, 1024, 64)]


def get_init_inputs():
    return [1024]


def get_cpu_inputs():
    return [torch.randn(3, 17, 8), torch.randn(3, 17, 8), torch.randn(3, 17, 8)]


def get_cpu_init_inputs():
    return [17]
