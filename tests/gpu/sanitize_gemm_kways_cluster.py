"""G33's gemm_splitk_swap K_WAYS=2 cluster forms on small ragged shapes, for compute-sanitizer: 1x2 clusters of column
tiles sharing A's tile by multicast (CLUSTER_N) and 2x1 clusters of row tiles sharing B's (CLUSTER_M), with the relaxed
coupling (the producer's tail in place of the closing cluster barrier) at wait_group 1 and 0, and clusters of 4.

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_kways_cluster.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_kways_cluster.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402, F401
from stdlib_kernels import gemm_hopper  # noqa: E402

d = torch.device("cuda")
g = torch.Generator(device="cuda").manual_seed(33)
KW = dict(SWAP_AB=1, K_WAYS=2, CONSUMERS=2, IN_FLIGHT=1, SPLIT_K=1, STAGES=4, BM=128, BN=64,
          INSTR=tp.nv.wgmma_m64n128k16_bf16)
# (constexprs, shape): 5 column tiles (the grid rounded to 6: one block past N), 11 k-tiles (an odd count: ring 1's last
# pair reads zeros), one k-tile (one pair), B's rows padded
CASES = [(dict(KW, CLUSTER_N=2, RELAXED=1), (130, 264, 700)), (dict(KW, CLUSTER_N=2, RELAXED=1), (200, 130, 64)),
         (dict(KW, CLUSTER_N=2, RELAXED=1, IN_FLIGHT=0), (130, 264, 700)),
         (dict(KW, CLUSTER_N=4, RELAXED=1), (130, 300, 500)), (dict(KW, CLUSTER_M=2, RELAXED=1), (300, 200, 700)),
         (dict(KW, CLUSTER_N=2), (130, 264, 300))]
for p, (m, n, k) in CASES:
    a = torch.randn(m, k, device=d, generator=g).bfloat16()
    b = torch.randn(k, n, device=d, generator=g).bfloat16()
    ref = a.double() @ b.double()
    for out in (torch.float32, torch.bfloat16):
        c = torch.full((m, n), float("nan"), device=d, dtype=out)
        gemm_hopper.launch(a, b, c, **p)
        torch.cuda.synchronize()
        err = float((c.double() - ref).norm() / ref.norm())
        print({x: p.get(x) for x in ("CLUSTER_M", "CLUSTER_N", "RELAXED", "IN_FLIGHT")}, (m, n, k), out, "rel err", err,
              flush=True)
        assert err < (4e-3 if out == torch.bfloat16 else 1e-5), err
print("ok")
