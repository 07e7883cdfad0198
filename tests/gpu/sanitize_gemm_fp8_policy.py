"""gemm_fp8's large-class policy (3 stages, the TMA-store epilogue, setmaxnreg 96 / 200; G10) on ragged shapes of
that class, and (G12) its persistent form where the class has more tiles than SMs (gemm_fp8_persistent_tma: the TMA
store in 64-column pieces, 4 stages, 96 / 200, GROUP_M 16) on a ragged shape, for compute-sanitizer; each output
checked against float64 of the e4m3 values. `persistent`: that shape alone (racecheck on it runs long).

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_fp8_policy.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_fp8_policy.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from stdlib_kernels import gemm_fp8  # noqa: E402

d = torch.device("cuda")
g = torch.Generator(device="cuda").manual_seed(0)
ONLY = sys.argv[1] if len(sys.argv) > 1 else ""
# partial tiles in M and N, K not a multiple of BK; the last: 17 x 17 tiles on 132 blocks (the persistent form)
for m, n, k in ((520, 1040, 2064), (1100, 1000, 1040), (2056, 4104, 1040)):
    if ONLY == "persistent" and m != 2056:
        continue
    assert gemm_fp8.shape_class(m, n, k) == "large"
    p = gemm_fp8.policy(m, n, k)
    if m == 2056:
        assert gemm_fp8.kernel_of(gemm_fp8.params_for(m, n, k))[0] is gemm_fp8.gemm_fp8_persistent_tma, p
    else:
        assert (p["STAGES"], p["EPILOGUE"], p["PRODUCER_REGS"], p["CONSUMER_REGS"]) == (3, 2, 96, 200), p
    a = torch.randn(m, k, device=d, generator=g).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=d, generator=g).to(torch.float8_e4m3fn)
    sa, sb = torch.full((1,), 0.5, device=d), torch.full((1,), 0.25, device=d)
    out = torch.full((m, n), float("nan"), device=d, dtype=torch.bfloat16)
    gemm_fp8.launch(a, b, sa, sb, out)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double().t()) * 0.125
    err = float((out.double() - ref).norm() / ref.norm())
    print("fp8 policy", m, n, k, "rel err", err, flush=True)
    assert err < 4e-3, err
print("ok")
