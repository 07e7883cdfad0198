import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Top-2 MoE: softmax router, renormalized top-k scattered into a (T, E) gate, stacked experts as einsums."""

    def __init__(self, hidden: int, ffn: int, experts: int, top_k: int):
        super().__init__()
        self.experts, self.top_k = experts, top_k
        self.router = nn.Linear(hidden, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, hidden, ffn) * hidden**-0.5)
        self.w3 = nn.Parameter(torch.randn(experts, hidden, ffn) * hidden**-0.5)
        self.w2 = nn.Parameter(torch.randn(experts, ffn, hidden) * ffn**-0.5)

    def forward(self, x):
        w, ids = torch.topk(torch.softmax(self.router(x), dim=-1), self.top_k, dim=-1)
        w = w / w.sum(dim=-1, keepdim=True)
        gate = torch.zeros(x.shape[0], self.experts, dtype=x.dtype, device=x.device).scatter(1, ids, w)
        h = F.silu(torch.einsum("th,ehf->etf", x, self.w1)) * torch.einsum("th,ehf->etf", x, self.w3)
        return torch.einsum("te,eth->th", gate, torch.einsum("etf,efh->eth", h, self.w2))


def get_inputs():
    return [torch.randn(4096, 1024)]


def get_init_inputs():
    return [1024, 2048, 8, 2]


def get_cpu_inputs():
    return [torch.randn(37, 24)]


def get_cpu_init_inputs():
    return [24, 20, 4, 2]
