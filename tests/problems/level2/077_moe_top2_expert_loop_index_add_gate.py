import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Top-2 MoE (Mixtral-style): softmax router, renormalized top-k, gate via index_add, experts looped densely."""

    def __init__(self, hidden: int, ffn: int, experts: int, top_k: int):
        super().__init__()
        self.experts, self.top_k = experts, top_k
        self.router = nn.Linear(hidden, experts, bias=False)
        self.w1 = nn.ModuleList(nn.Linear(hidden, ffn, bias=False) for _ in range(experts))
        self.w3 = nn.ModuleList(nn.Linear(hidden, ffn, bias=False) for _ in range(experts))
        self.w2 = nn.ModuleList(nn.Linear(ffn, hidden, bias=False) for _ in range(experts))

    def forward(self, x):
        t = x.reshape(-1, x.shape[-1])
        n, e = t.shape[0], self.experts
        w, ids = torch.topk(torch.softmax(self.router(t), dim=-1), self.top_k, dim=-1)
        w = w / w.sum(dim=-1, keepdim=True)
        slots = (torch.arange(n, device=x.device)[:, None] * e + ids).reshape(-1)
        gate = torch.zeros(n * e, dtype=t.dtype, device=x.device).index_add(0, slots, w.reshape(-1)).view(n, e)
        out = torch.zeros_like(t)
        for k in range(e):
            y = self.w2[k](F.silu(self.w1[k](t)) * self.w3[k](t))
            out = out + gate[:, k : k + 1] * y
        return out.view_as(x)


def get_inputs():
    return [torch.randn(8, 512, 1024)]


def get_init_inputs():
    return [1024, 2048, 8, 2]


def get_cpu_inputs():
    return [torch.randn(3, 13, 24)]


def get_cpu_init_inputs():
    return [24, 20, 4, 2]
