"""gemm_cluster (launch with CLUSTER_M=2: 2x1 thread-block clusters, B multicast) on small ragged shapes, f32 and
bf16 out (the TMA-store epilogue), for compute-sanitizer: an odd number of M tiles (the grid rounded up to whole
clusters, the extra block storing nothing), K not a multiple of BK.

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_cluster.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_cluster.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import tilepy as tp  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402

d = torch.device("cuda")
g = torch.Generator(device="cuda").manual_seed(0)
for (m, k, n), extra in (((300, 200, 264), dict(CLUSTER_M=2, **gemm_hopper.SMALL_TILE)),
                         ((384, 520, 256), dict(CLUSTER_M=2))):       # the default 128x256 tile, 3 M tiles
    a = torch.randn(m, k, device=d, generator=g).bfloat16()
    b = torch.randn(k, n, device=d, generator=g).bfloat16()
    ref = a.double() @ b.double()
    for out, epi in ((torch.float32, 0), (torch.bfloat16, 2)):
        c = torch.full((m, n), float("nan"), device=d, dtype=out)
        gemm_hopper.launch(a, b, c, out_dtype=tp.bf16 if out == torch.bfloat16 else tp.f32, EPILOGUE=epi,
                           STAGES=3, **extra)
        torch.cuda.synchronize()
        err = float((c.double() - ref).norm() / ref.norm())
        print(m, k, n, out, "rel err", err, flush=True)
        assert err < (4e-3 if out == torch.bfloat16 else 1e-5), err
print("ok")
