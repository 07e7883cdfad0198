"""Time gemm_hopper (128x256 s4 preset) against torch.matmul bf16 at a shape whose B cannot be a tensor map
(2051, 1000, 2045: the cooperative copy fallback) and at 4096^3 (all TMA). python3 tests/gpu/bench_gemm_fallback.py"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402
from tilepy_hip.launch import launch_compiled  # noqa: E402


def bench(fn, iters=20):
    """Microseconds per call of the GPU work, from a CUDA graph of `iters` calls (no host overhead)."""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(iters):
            fn()
    g.replay()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(5):
        s.record()
        g.replay()
        e.record()
        torch.cuda.synchronize()
        best = min(best, s.elapsed_time(e) / iters)
    return best * 1e3


d = torch.device("cuda")
p = gemm_hopper.PRESETS["sm_90a"]
for m, k, n in ((2051, 1000, 2045), (4096, 4096, 4096)):
    a = torch.randn(m, k, device=d).bfloat16()
    b = torch.randn(k, n, device=d).bfloat16()
    c = torch.empty(m, n, device=d)
    grid = (tp.cdiv(m, p["BM"]), tp.cdiv(n, p["BN"]))
    ck = tilepy_hip.compile(gemm_hopper.gemm_hopper, target="sm_90a", **p)
    tilepy_hip.launch(gemm_hopper.gemm_hopper, grid, a, b, c, **p)
    torch.cuda.synchronize()
    err = ((c - a.float() @ b.float()).norm() / (a.float() @ b.float()).norm()).item()
    t_l = bench(lambda ck=ck, grid=grid, args=(a, b, c): launch_compiled(ck, grid, args))
    t_t = bench(lambda a=a, b=b: torch.matmul(a, b))
    fl = 2 * m * n * k
    print(f"({m},{k},{n}) gemm_hopper {t_l:.1f} us ({fl / t_l / 1e6:.0f} TFLOP/s); "
          f"torch.matmul bf16 {t_t:.1f} us ({fl / t_t / 1e6:.0f} TFLOP/s); ratio {t_t / t_l:.2f}x; rel err {err:.1e}")
