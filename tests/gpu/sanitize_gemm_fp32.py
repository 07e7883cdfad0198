"""The fp32-accurate GEMM once per B layout on ragged shapes (TMA and the producer's own copies), A split in
the GEMM's registers (A_RAW, K % 4 == 0: RAW, whose chains are waited once, and a wait after each chain) and
by the split pass, for
compute-sanitizer:

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_fp32.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_fp32.py
(`--split-k`: only launch's split-K policy cases)
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from stdlib_kernels import gemm_fp32  # noqa: E402

d = torch.device("cuda")
ONLY_SPLIT_K = "--split-k" in sys.argv     # just launch's split-K policy cases
for lay in (() if ONLY_SPLIT_K else ("kn", "nk")):
    for m, n, k, params in ((300, 200, 136, {}), (300, 200, 136, dict(A_RAW=0)), (70, 66, 99, {}),
                            (300, 200, 136, dict(WAIT_ONCE=0))):
        a = torch.randn(2, m, k, device=d)
        b = torch.randn((1, k, n) if lay == "kn" else (1, n, k), device=d)
        c = torch.empty(2, m, n, device=d)
        gemm_fp32.launch(a, b, c, b_layout=lay, **params)
torch.cuda.synchronize()
print("ok")

for lay, (m, n, k) in (("kn", (70, 1000, 1001)), ("nk", (100, 3000, 2000))):   # launch's split-K policy
    assert gemm_fp32.policy(m, n, k).get("KSPLIT", 1) > 1
    a = torch.randn(m, k, device=d)
    b = torch.randn((k, n) if lay == "kn" else (n, k), device=d)
    gemm_fp32.launch(a, b, torch.empty(m, n, device=d), b_layout=lay)
torch.cuda.synchronize()
print("ok split-K")
if ONLY_SPLIT_K:
    sys.exit(0)

from stdlib_kernels import gemm_hopper  # noqa: E402

a16 = torch.randn(130, 520, device=d).bfloat16()
b16 = torch.randn(520, 264, device=d).bfloat16()
gemm_hopper.launch(a16, b16, torch.empty(130, 264, device=d, dtype=torch.bfloat16))   # bf16 out
torch.cuda.synchronize()
print("ok bf16 out")
