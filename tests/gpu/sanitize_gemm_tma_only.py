"""G31: gemm_hopper.launch's TMA_ONLY=1 policy forms (gemm_hopper / gemm_splitk / gemm_cluster, the operands' copies
without the per-element fallback) on small ragged shapes, for compute-sanitizer, with the constexprs of the shape each
form serves; and one form on an operand whose base is 2 bytes off 16 (launch drops TMA_ONLY: the fallback copies).

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_tma_only.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_tma_only.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402, F401
from stdlib_kernels import gemm_hopper  # noqa: E402

d = torch.device("cuda")
g = torch.Generator(device="cuda").manual_seed(31)
# (the shape whose policy is the form, the shape it runs at, the operands' offset in elements)
CASES = [((768, 768, 768), (130, 200, 300), 0),         # 64 x 128, 8 stages, TMA store (bf16)
         ((200, 2048, 4096), (70, 264, 520), 0),        # 64 x 128 split 2, FIXUP=3
         ((16, 14336, 4096), (16, 300, 200), 0),        # 64 x 128 unsplit
         ((2051, 2045, 1000), (200, 261, 200), 0),      # 128 x 256 (3 stages, 64 / 216 registers, TMA store: bf16)
         ((3000, 5000, 4096), (300, 264, 200), 0),      # 128 x 256 in clusters of 2 (bf16) / 4 (f32)
         ((768, 768, 768), (130, 200, 300), 1)]         # an A and B 2 bytes off 16: TMA_ONLY dropped
for policy_shape, (m, n, k), off in CASES:
    a = torch.randn(m * k + 8, device=d, generator=g).bfloat16()[off:off + m * k].view(m, k)
    b = torch.randn(k * n + 8, device=d, generator=g).bfloat16()[off:off + k * n].view(k, n)
    ref = a.double() @ b.double()
    for out, o in ((torch.float32, tp.f32), (torch.bfloat16, tp.bf16)):
        p = gemm_hopper.policy(*policy_shape, o, fixup=True)
        assert p["TMA_ONLY"] == 1
        if off:
            p = {key: v for key, v in p.items() if key != "TMA_ONLY"}   # launch decides (drops it)
        c = torch.full((m, n), float("nan"), device=d, dtype=out)
        gemm_hopper.launch(a, b, c, **p)
        torch.cuda.synchronize()
        err = float((c.double() - ref).norm() / ref.norm())
        assert err < (1e-5 if out == torch.float32 else 4e-3), (policy_shape, (m, n, k), off, out, err)
        print(f"ok {policy_shape} at {(m, n, k)} offset {off} {out}: rel err {err:.1e}", flush=True)
