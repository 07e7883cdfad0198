"""compute-sanitizer target (L7): the embedding-bag kernel (aligned and unaligned rows), a lowered row gather on
the vector path and its fallback, and a reflect-padded and a circular-padded convolution whose input is computed
in conv_tma's channels-last copy, once each at small sizes. Prints ok and the max error against float64."""

import importlib.util
import os
import sys
import tempfile

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from argus_agent.lower import lower_model, render_program  # noqa: E402
from stdlib_kernels.embedding_bag import embedding_bag, grid  # noqa: E402


def run(model, xs, name):
    p = os.path.join(tempfile.mkdtemp(), f"{name}.py")
    with open(p, "w") as f:
        f.write(render_program(lower_model(model, xs, "sm_90a")))
    spec = importlib.util.spec_from_file_location(name, p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        out = mod.argus_forward(model, *xs)
        ref = model.double()(*[x.double() if x.is_floating_point() else x for x in xs])
    torch.cuda.synchronize()
    print("ok", name, float((out.double() - ref).abs().max()))


dev = torch.device("cuda")
for V, D, BD in [(200, 512, 512), (100, 70, 128)]:
    w, ids = torch.randn(V, D, device=dev), torch.randint(0, V, (20, 9), device=dev)
    y = torch.empty(20, D, device=dev)
    embedding_bag[grid(20, D, BD)](w, ids, y, MODE=1, BJ=8, BD=BD)
    torch.cuda.synchronize()
    print("ok embedding_bag", D, float((y.double() - w.double()[ids].mean(1)).abs().max()))


class Sel(nn.Module):
    def forward(self, x, i):
        return x.index_select(0, i) + 1.0


for cols in (64, 13):
    run(Sel(), [torch.randn(50, cols, device=dev), torch.randint(0, 50, (40,), device=dev)], f"sel{cols}")
torch.backends.cudnn.allow_tf32 = False
for mode in ("reflect", "circular"):
    run(nn.Conv2d(32, 32, 3, padding=1, padding_mode=mode).to(dev), [torch.randn(1, 32, 12, 20, device=dev)],
        f"conv_{mode}")
