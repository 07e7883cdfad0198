"""The scaled fp8 GEMM once per policy class on small ragged shapes, for compute-sanitizer:

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_fp8.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_fp8.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from stdlib_kernels import gemm_fp8  # noqa: E402

d = torch.device("cuda")
for (m, n, k), extra in (((200, 300, 272), {}),                                 # small class
                         ((136, 260, 400), dict(gemm_fp8.PRESETS["sm_90a"])),    # the large preset, ragged
                         ((40, 200, 160), {}),                                   # skinny class
                         ((300, 520, 400), dict(PERSISTENT=1, NUM_SMS=3))):       # persistent, 6 tiles on 3
    a = torch.randn(m, k, device=d).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=d).to(torch.float8_e4m3fn)
    s = torch.ones(1, device=d)
    out = torch.empty(m, n, device=d, dtype=torch.bfloat16)
    gemm_fp8.launch(a, b, s, s, out, **extra)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double().t())
    print(m, n, k, "rel err", float((out.double() - ref).norm() / ref.norm()))
print("ok")
