"""G38's one-launch prototype (benchmarks/profile/g38_bkn.py) for compute-sanitizer: ragged M / N / K, both tile
widths, 2-4 stages, a batch sharing one B, the halves made in line and a tile ahead (AHEAD); each bit for bit
gemm_fp32.launch's and against float64.

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_fp32_bkn.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_fp32_bkn.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "profile"))

import g38_bkn  # noqa: E402

import tilepy as tp  # noqa: E402
from stdlib_kernels import gemm_fp32  # noqa: E402

d = torch.device("cuda")
g = torch.Generator(device="cuda").manual_seed(0)
for m, n, k, bn, stages, batch in ((130, 200, 72, 128, 4, 1), (100, 68, 40, 64, 4, 1), (64, 128, 260, 64, 3, 1),
                                   (70, 132, 100, 128, 2, 2), (256, 256, 512, 64, 4, 1)):
    a = torch.randn(batch, m, k, device=d, generator=g)
    b = torch.randn(k, n, device=d, generator=g)
    c0 = torch.full((batch, m, n), float("nan"), device=d)
    instr = {64: tp.nv.wgmma_m64n64k8_tf32, 128: tp.nv.wgmma_m64n128k8_tf32}[bn]
    gemm_fp32.launch(a, b, c0, "kn", BN=bn, INSTR=instr, STAGES=stages, SWAP=0)
    ref = a.double() @ b.double()
    for ahead in (0, 1):
        c = torch.full((batch, m, n), float("nan"), device=d)
        g38_bkn.launch_bkn(a, b, c, **{**g38_bkn.params(bn), "STAGES": stages, "AHEAD": ahead})
        torch.cuda.synchronize()
        err = float((c.double() - ref).norm() / ref.norm())
        print("bkn", (batch, m, n, k), "BN", bn, "stages", stages, "AHEAD", ahead, "rel err", err, "bitwise",
              torch.equal(c, c0), flush=True)
        assert torch.equal(c, c0) and err < 2.0**-22, err
print("ok")
