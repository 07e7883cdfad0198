"""gemm_fp8's small / mid forms (G28: 64 x 128 / 64 x 64 / 128 x 128 tiles, deep rings, the TMA store; the persistent
form on 128 x 128 tiles) on ragged shapes, for compute-sanitizer; each output checked against float64 of the e4m3
values. Forms named on the command line run alone (default: all of tests/gpu/test_gemm_fp8_small.py's FORMS).

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_fp8_small.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_fp8_small.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.dirname(__file__))

from test_gemm_fp8_small import FORMS, _params  # noqa: E402

from stdlib_kernels import gemm_fp8  # noqa: E402

d = torch.device("cuda")
g = torch.Generator(device="cuda").manual_seed(0)
names = sys.argv[1:] or list(FORMS)
for name in names:
    p = _params(name)
    kernel, kp = gemm_fp8.kernel_of(p)
    # partial tiles in M and N, K past a k-tile boundary, the ring turning over; N % 8 != 0 (the store's fallback)
    # (the persistent form's store is TMA only: C rows of 16-byte multiples)
    shapes = ((200, 304, 1040), (130, 264, 64)) if p.get("PERSISTENT") else ((200, 300, 1040), (130, 264, 64),
                                                                              (70, 90, 272))
    for m, n, k in shapes:
        a = torch.randn(m, k, device=d, generator=g).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=d, generator=g).to(torch.float8_e4m3fn)
        sa, sb = torch.full((1,), 0.5, device=d), torch.full((1,), 0.25, device=d)
        out = torch.full((m, n), float("nan"), device=d, dtype=torch.bfloat16)
        grid = gemm_fp8.grid_of(m, n, {**p, "NUM_SMS": 3} if p.get("PERSISTENT") else p)
        kernel[grid](a, b, sa, sb, out, target="sm_90a", **kp)
        torch.cuda.synchronize()
        ref = (a.double() @ b.double().t()) * 0.125
        err = float((out.double() - ref).norm() / ref.norm())
        print("fp8 small", name, m, n, k, "rel err", err, flush=True)
        assert err < 4e-3, err
if not sys.argv[1:]:
    # the policy through launch where it picks each form (small shapes: racecheck runs long)
    for m, n, k in ((300, 136, 528), (600, 1000, 272), (300, 130, 400), (1000, 520, 1040), (1000, 1536, 272)):
        assert gemm_fp8.small_form(m, n, k) is not None, (m, n, k)
        a = torch.randn(m, k, device=d, generator=g).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=d, generator=g).to(torch.float8_e4m3fn)
        sa, sb = torch.full((1,), 0.5, device=d), torch.full((1,), 0.25, device=d)
        out = torch.full((m, n), float("nan"), device=d, dtype=torch.bfloat16)
        gemm_fp8.launch(a, b, sa, sb, out)
        torch.cuda.synchronize()
        ref = (a.double() @ b.double().t()) * 0.125
        err = float((out.double() - ref).norm() / ref.norm())
        print("fp8 small policy", m, n, k, gemm_fp8.small_form(m, n, k)["BN"], "rel err", err, flush=True)
        assert err < 4e-3, err
print("ok")
