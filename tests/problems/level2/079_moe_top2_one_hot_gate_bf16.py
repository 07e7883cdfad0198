import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Top-2 MoE in bf16: renormalized top-k one-hot gate, stacked SiLU-gated experts as bmm, weighted sum."""

    def __init__(self, hidden: int, ffn: int, experts: int, top_k: int):
        super().__init__()
        self.experts, self.top_k = experts, top_k
        self.router = nn.Linear(hidden, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, hidden, ffn) * hidden**-0.5)
        self.w3 = nn.Parameter(torch.randn(experts, hidden, ffn) * hidden**-0.5)
        self.w2 = nn.Parameter(torch.randn(experts, ffn, hidden) * ffn**-0.5)
        self.to(torch.bfloat16)

    def forward(self, x):
        probs = torch.softmax(self.router(x).float(), dim=-1)
        w, ids = torch.topk(probs, self.top_k, dim=-1)
        w = w / w.sum(dim=-1, keepdim=True)
        gate = (F.one_hot(ids, self.experts).to(w.dtype) * w[..., None]).sum(dim=1)     # (T, E)
        xe = x.unsqueeze(0).expand(self.experts, -1, -1)
        h = F.silu(torch.bmm(xe, self.w1)) * torch.bmm(xe, self.w3)
        y = torch.bmm(h, self.w2)                                                        # (E, T, H)
        return (gate.t().unsqueeze(-1) * y.float()).sum(dim=0).to(x.dtype)


def get_inputs():
    return [torch.randn(4096, 1024, dtype=torch.bfloat16)]


def get_init_inputs():
    return [1024, 2048, 8, 2]


def get_cpu_inputs():
    return [torch.randn(37, 24, dtype=torch.bfloat16)]


def get_cpu_init_inputs():
    return [24, 20, 4, 2]
