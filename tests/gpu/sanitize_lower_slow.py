"""compute-sanitizer target: the slow problems' new lowered kernels once each at small sizes (the bf16 Linear's
gemm_hopper with B_NK and its bias-initialized accumulator at the small policy, the row kernel
after it, and the adaptive pool's passes). Prints ok and the max error against eager."""

import importlib.util
import os
import sys
import tempfile

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from argus_agent.lower import lower_model, render_program  # noqa: E402


class LinearGeluNorm(torch.nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = torch.nn.Linear(k, n).to(torch.bfloat16)
        self.norm = torch.nn.LayerNorm(n).to(torch.bfloat16)

    def forward(self, x):
        return self.norm(F.gelu(self.fc(x)))


class Pool(torch.nn.Module):
    def forward(self, x):
        return F.adaptive_avg_pool2d(x, (7, 7))


def run(model, x, name):
    p = os.path.join(tempfile.mkdtemp(), f"{name}.py")
    with open(p, "w") as f:
        f.write(render_program(lower_model(model, [x], "sm_90a")))
    spec = importlib.util.spec_from_file_location(name, p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model, x = model.cuda(), x.cuda()
    with torch.no_grad():
        out = mod.argus_forward(model, x)
        torch.cuda.synchronize()
        print("ok", name, float((out.double() - model(x).double()).abs().max()))


torch.manual_seed(0)
run(LinearGeluNorm(128, 256), torch.randn(320, 128).bfloat16(), "linear_small")
run(Pool(), torch.randn(2, 4, 47, 45), "pool")
