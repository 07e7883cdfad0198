"""gemm_persistent (launch with PERSISTENT=1) on small ragged shapes, f32 and bf16 out, for compute-sanitizer: a
grid of 3 blocks walking several output tiles each (the ring running on across them).

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_persistent.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_persistent.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import tilepy as tp  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402

d = torch.device("cuda")
g = torch.Generator(device="cuda").manual_seed(0)
for (m, k, n), extra in (((300, 520, 264), dict(PERSISTENT=1, NUM_SMS=3, GROUP_M=2, **gemm_hopper.SMALL_TILE)),
                         ((260, 200, 520), dict(PERSISTENT=1, NUM_SMS=3))):   # the default 128x256, ragged K
    a = torch.randn(m, k, device=d, generator=g).bfloat16()
    b = torch.randn(k, n, device=d, generator=g).bfloat16()
    ref = a.double() @ b.double()
    for out in (torch.float32, torch.bfloat16):
        c = torch.full((m, n), float("nan"), device=d, dtype=out)
        gemm_hopper.launch(a, b, c, out_dtype=tp.bf16 if out == torch.bfloat16 else tp.f32, **extra)
        torch.cuda.synchronize()
        err = float((c.double() - ref).norm() / ref.norm())
        print(m, k, n, out, "rel err", err, flush=True)
        assert err < (4e-3 if out == torch.bfloat16 else 1e-5), err
print("ok")
