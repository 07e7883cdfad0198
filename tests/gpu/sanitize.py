"""Run every GPU kernel once on small inputs with partial tiles, for compute-sanitizer:

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "hip"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import kernels as extra  # noqa: E402

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm, gemm_hopper, rmsnorm, softmax, vector_add  # noqa: E402

d = torch.device("cuda")
L = tilepy_hip.launch
x = torch.randn(5000, device=d)
L(vector_add.vector_add, (5,), x, x, torch.empty_like(x))
x2 = torch.randn(37, 1000, device=d)
L(softmax.softmax, (37,), x2, torch.empty_like(x2), BLOCK_N=1024)
L(rmsnorm.rmsnorm, (37,), x2, torch.randn(1000, device=d), torch.empty_like(x2), 1e-6, BLOCK_N=1024)
a = torch.randn(130, 200, device=d).bfloat16()
b = torch.randn(200, 66, device=d).bfloat16()
for preset in ("sm_90a", "sm_80"):
    p = gemm.PRESETS[preset]
    L(
        gemm.gemm,
        (tp.cdiv(130, p["BM"]), tp.cdiv(66, p["BN"])),
        a,
        b,
        torch.empty(130, 66, device=d),
        target="sm_90a",
        **p,
    )
for extra_params in (gemm_hopper.SMALL_TILE, {}):  # TMA + wgmma, ragged
    p = {**gemm_hopper.PRESETS["sm_90a"], **extra_params}
    a2 = torch.randn(130, 520, device=d).bfloat16()
    b2 = torch.randn(520, 264, device=d).bfloat16()
    L(gemm_hopper.gemm_hopper, (tp.cdiv(130, p["BM"]), tp.cdiv(264, p["BN"])), a2, b2,
      torch.empty(130, 264, device=d), **p)
    L(gemm_hopper.gemm_hopper, (tp.cdiv(130, p["BM"]), tp.cdiv(66, p["BN"])), a, b,
      torch.empty(130, 66, device=d), **p)  # 200 and 66 columns: the element fallback
xt = torch.randn(150, 136, device=d).bfloat16()
L(extra.tma_tile, (3, 3), xt, torch.empty(150, 136, device=d))
n = 32 * 5 + 7
L(extra.bulk_ws, (tp.cdiv(n, 32),), torch.randn(n, device=d), torch.empty(n, device=d))
n = 512 * 3 + 100
L(extra.producer_consumer, (tp.cdiv(n, 512),), torch.randn(n, device=d), torch.empty(n, device=d))
n = 16384 + 5
L(extra.big_smem, (2,), torch.randn(n, device=d), torch.empty(n, device=d))
x3 = torch.randn(50, 70, device=d)
L(extra.col_stats, (3,), x3, torch.empty(70, device=d), torch.empty(70, device=d))
L(extra.row_math, (4,), torch.randn(4, 256, device=d), torch.empty(4, 256, device=d))
torch.cuda.synchronize()
print("sanitize.py: all kernels ran")

# The launch fast path: the same signatures again on new tensors (pointers, scalars and tensor maps refilled),
# then a CUDA graph of a host program replayed on new data.
x = torch.randn(5000, device=d)
vector_add.vector_add[(5,)](x, x, torch.empty_like(x))
x2 = torch.randn(37, 1000, device=d)
L(rmsnorm.rmsnorm, (37,), x2, torch.randn(1000, device=d), torch.empty_like(x2), 0.5, BLOCK_N=1024)
p = {**gemm_hopper.PRESETS["sm_90a"], **gemm_hopper.SMALL_TILE}
for _ in range(2):
    a2 = torch.randn(130, 520, device=d).bfloat16()
    b2 = torch.randn(520, 264, device=d).bfloat16()
    L(gemm_hopper.gemm_hopper, (tp.cdiv(130, p["BM"]), tp.cdiv(264, p["BN"])), a2, b2,
      torch.empty(130, 264, device=d), **p)


def host(x):
    y = torch.empty_like(x)
    softmax.softmax[(x.shape[0],)](x, y, BLOCK_N=1024)
    return y


g = tilepy_hip.graphs.capture(host, x2)
g.inputs[0].copy_(torch.randn(37, 1000, device=d))
g.replay()
torch.cuda.synchronize()
print("sanitize.py: the fast path and a graph replay ran")
