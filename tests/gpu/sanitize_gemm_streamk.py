"""gemm_streamk on small ragged shapes, f32 and bf16 out, for compute-sanitizer: grids of 3-7 blocks whose shares
split tiles two and three ways (the fix-up through the workspace and tickets), twice per shape.

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_streamk.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_streamk.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import tilepy as tp  # noqa: E402
from stdlib_kernels import gemm_streamk as sk  # noqa: E402

d = torch.device("cuda")
g = torch.Generator(device="cuda").manual_seed(0)
for (m, k, n), preset, sms in (((100, 520, 264), "narrow", 5), ((200, 200, 136), "wide", 3), ((70, 1000, 128),
                                                                                                "narrow", 7)):
    a = torch.randn(m, k, device=d, generator=g).bfloat16()
    b = torch.randn(k, n, device=d, generator=g).bfloat16()
    ref = a.double() @ b.double()
    for out in (torch.float32, torch.bfloat16):
        for _ in range(2):
            c = torch.full((m, n), float("nan"), device=d, dtype=out)
            sk.launch(a, b, c, num_sms=sms, out_dtype=tp.bf16 if out == torch.bfloat16 else tp.f32,
                      **sk.PRESETS[preset])
            torch.cuda.synchronize()
            err = float((c.double() - ref).norm() / ref.norm())
            print(m, k, n, preset, sms, out, "rel err", err, flush=True)
            assert err < (4e-3 if out == torch.bfloat16 else 1e-5), err
print("ok")
