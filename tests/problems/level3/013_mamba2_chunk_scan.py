import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Mamba-2's intra-chunk scan: exp of masked cumsum differences of log-decays weight C B^T, applied to X."""

    def __init__(self, chunk: int):
        super().__init__()
        self.chunk = chunk

    def forward(self, x, a_raw, b, c):
        # x: (batch, heads, chunk, headdim); a_raw: (batch, heads, chunk); b, c: (batch, heads, chunk, state)
        a = -F.softplus(a_raw) * 0.05
        cs = torch.cumsum(a, dim=-1)
        seg = cs[..., :, None] - cs[..., None, :]
        keep = torch.tril(torch.ones(self.chunk, self.chunk, dtype=torch.bool, device=x.device))
        decay = torch.exp(seg.masked_fill(~keep, float("-inf")))
        scores = torch.einsum("bhln,bhsn->bhls", c, b) * decay
        return torch.einsum("bhls,bhsp->bhlp", scores, x)


def get_inputs():
    return [torch.randn(16, 32, 256, 64), torch.randn(16, 32, 256), torch.randn(16, 32, 256, 64),
            torch.randn(16, 32, 256, 64)]


def get_init_inputs():
    return [256]


def get_cpu_inputs():
    return [torch.randn(2, 2, 8, 4), torch.randn(2, 2, 8), torch.randn(2, 2, 8, 3), torch.randn(2, 2, 8, 3)]


def get_cpu_init_inputs():
    return [8]
