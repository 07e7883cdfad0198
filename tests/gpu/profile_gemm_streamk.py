"""One launch each of gemm_streamk (64x128, a grid of whole splits: FIXUP=1 unrolled and looped, FIXUP=2) and
gemm_hopper's split-K kernel at 16 x 4096 x 4096, bf16 out, for Nsight Compute:

ncu -k regex:gemm --section SpeedOfLight --section WarpStateStats python3 tests/gpu/profile_gemm_streamk.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from stdlib_kernels import gemm_hopper  # noqa: E402
from stdlib_kernels import gemm_streamk as sk  # noqa: E402

M, N, K = 16, 4096, 4096
g = torch.Generator(device="cuda").manual_seed(0)
a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
b = torch.randn(K, N, device="cuda", generator=g).bfloat16()
c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
p = sk.PRESETS["narrow"]
for extra in ({}, {"FIXUP": 2}, {"MAX_PARTS": 0}):
    sk.launch(a, b, c, num_sms=128, **{**p, **extra})
gemm_hopper.launch(a, b, c)
torch.cuda.synchronize()
print("ok")
