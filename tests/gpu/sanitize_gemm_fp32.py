"""The fp32-accurate GEMM once per B layout on ragged shapes (TMA and the producer's own copies), A split in
the GEMM's registers (A_RAW, K % 4 == 0: RAW, whose chains are waited once, and a wait after each chain) and
by the split pass, for
compute-sanitizer:

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_fp32.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_fp32.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from stdlib_kernels import gemm_fp32  # noqa: E402

d = torch.device("cuda")
for lay in ("kn", "nk"):
    for m, n, k, params in ((300, 200, 136, {}), (300, 200, 136, dict(A_RAW=0)), (70, 66, 99, {}),
                            (300, 200, 136, dict(WAIT_ONCE=0))):
        a = torch.randn(2, m, k, device=d)
        b = torch.randn((1, k, n) if lay == "kn" else (1, n, k), device=d)
        c = torch.empty(2, m, n, device=d)
        gemm_fp32.launch(a, b, c, b_layout=lay, **params)
torch.cuda.synchronize()
print("ok")

from stdlib_kernels import gemm_hopper  # noqa: E402

a16 = torch.randn(130, 520, device=d).bfloat16()
b16 = torch.randn(520, 264, device=d).bfloat16()
gemm_hopper.launch(a16, b16, torch.empty(130, 264, device=d, dtype=torch.bfloat16))   # bf16 out
torch.cuda.synchronize()
print("ok bf16 out")
