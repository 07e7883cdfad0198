"""The MoE layer (stdlib_kernels/moe.py) on the GPU through tilepy_hip with the H100 tiles (PRESETS: TMA
producer + two wgmma consumer warpgroups), on fresh random inputs: routing against torch.topk, the permutation
exactly, each grouped GEMM against float64 on the rows it owns, the layer against a float64 reference, with
ragged sizes, empty experts and the issue's two shapes (Mixtral-like, fine-grained) at few tokens. Skips
without a GPU."""

from __future__ import annotations

import os

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

from stdlib_kernels import moe  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")


def rel(out, ref) -> float:
    out, ref = out.double(), ref.double()
    assert torch.isfinite(out).all(), "NaN/inf in the output (an element not written?)"
    return float((out - ref).norm() / max(ref.norm(), 1e-30))


def make(t, h, f, e, request):
    seed = abs(hash(request.node.nodeid)) % 2**31 + int.from_bytes(os.urandom(2), "little")
    g = torch.Generator(device=DEV).manual_seed(seed)
    x = torch.randn(t, h, generator=g, device=DEV).bfloat16()
    logits = torch.randn(t, e, generator=g, device=DEV) * 2
    w13 = (torch.randn(e, h, 2 * f, generator=g, device=DEV) / h ** 0.5).bfloat16()
    w2 = (torch.randn(e, f, h, generator=g, device=DEV) / f ** 0.5).bfloat16()
    return x, logits, w13, w2


@pytest.mark.parametrize("t,h,f,e,k", [
    (37, 256, 384, 8, 2),       # ragged: F = 3 x 128, H = one 256-column tile
    (300, 136, 200, 4, 3),      # H, F not tile multiples (TMA zero-fills, stores masked); > 128 rows per expert
    (5, 512, 256, 16, 2),       # most experts empty
    (16, 4096, 14336, 8, 2),    # Mixtral-like
    (64, 2048, 1408, 64, 6),    # fine-grained
])
def test_moe_layer(t, h, f, e, k, request):
    x, logits, w13, w2 = make(t, h, f, e, request)
    out, parts = moe.moe(x, logits, w13, w2, k, return_parts=True)
    torch.cuda.synchronize()
    small = int(parts["counts"].max()) <= 64
    assert parts["presets"] is (moe.SMALL_M if small else moe.PRESETS)
    ids, rank, counts = parts["ids"].long(), parts["rank"].long(), parts["counts"]
    wv, ref_ids = torch.topk(torch.softmax(logits.double(), dim=1), k, dim=1)
    assert torch.equal(ids, ref_ids)
    torch.testing.assert_close(parts["weights"].double(), wv / wv.sum(dim=1, keepdim=True), rtol=1e-6, atol=1e-7)
    assert torch.equal(counts.long(), torch.bincount(ids.flatten(), minlength=e))
    xs, hs, ys = parts["xs"], parts["hs"], parts["ys"]
    for ex in range(e):
        n = int(counts[ex])
        tok = torch.nonzero(ids == ex, as_tuple=True)[0]
        assert torch.equal(xs[ex, rank[ids == ex]], x[tok])
        assert (xs[ex, n:] == 0).all()
        if n == 0:
            continue
        gu = xs[ex, :n].double() @ w13[ex].double()
        assert rel(hs[ex, :n], torch.nn.functional.silu(gu[:, :f]) * gu[:, f:]) < 4e-3
        assert rel(ys[ex, :n], hs[ex, :n].double() @ w2[ex].double()) < 4e-3
    ref, _, _ = moe.reference(x, logits, w13, w2, k, round_to=torch.bfloat16)
    assert rel(out, ref) < 4e-3


def test_moe_small_matches_interpreter_routing(request):
    """The routing kernel on the GPU and on the interpreter agree exactly (ids, ranks per expert, counts)."""
    x, logits, _, _ = make(40, 8, 8, 8, request)
    gpu = moe.route(logits, 2)
    cpu = moe.route(logits.cpu(), 2)
    assert torch.equal(gpu[0].cpu(), cpu[0]) and torch.equal(gpu[3].cpu(), cpu[3])
    torch.testing.assert_close(gpu[1].cpu(), cpu[1], rtol=1e-6, atol=1e-7)
