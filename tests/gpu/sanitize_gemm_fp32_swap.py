"""gemm_fp32's swap-AB forms (gemm_fp32_ct: the weight split in registers, the transposed store; gemm_fp32_kt: a
(K, N) B read M-major and loaded transposed), unsplit and split-K, ragged rows / columns / K, and launch_policy's
64-wide unsplit tiles, for compute-sanitizer; each output checked against float64.

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_fp32_swap.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_fp32_swap.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from stdlib_kernels import gemm_fp32  # noqa: E402

d = torch.device("cuda")
g = torch.Generator(device="cuda").manual_seed(0)
for m, n, k, extra in ((16, 300, 1032, {}), (40, 130, 264, {}), (100, 520, 2000, dict(KSPLIT=3)),
                       (130, 200, 516, dict(STAGES=2))):
    x = torch.randn(m, k, device=d, generator=g)
    w = torch.randn(n, k, device=d, generator=g)
    c = torch.full((m, n), float("nan"), device=d)
    gemm_fp32.launch(x, w, c, b_layout="nk", SWAP=1, **extra)
    torch.cuda.synchronize()
    ref = x.double() @ w.double().t()
    err = float((c.double() - ref).norm() / ref.norm())
    print("fp32 swap", m, n, k, extra, "rel err", err, flush=True)
    assert err < 3e-7, err
print("ok")

for form in (1, 2):      # B's staged tile: swizzled 32-column blocks, row-major (KN_FORM)
    gemm_fp32.KN_FORM = form
    for m, n, k, extra in ((16, 300, 1030, {}), (40, 132, 262, {}), (100, 520, 2000, dict(KSPLIT=3)),
                           (130, 200, 517, dict(STAGES=2))):
        x = torch.randn(m, k, device=d, generator=g)
        b = torch.randn(k, n, device=d, generator=g)
        c = torch.full((m, n), float("nan"), device=d)
        gemm_fp32.launch(x, b, c, b_layout="kn", SWAP=1, **extra)
        torch.cuda.synchronize()
        ref = x.double() @ b.double()
        err = float((c.double() - ref).norm() / ref.norm())
        print("fp32 swap kn form", form, m, n, k, extra, "rel err", err, flush=True)
        assert err < 3e-7, err
print("ok")

# launch_policy's 64-wide unsplit tiles (1024^3 on 132 SMs; here 256 x 256 x 1024 on a pretended 8)
gemm_fp32.SMS = 8
assert gemm_fp32.launch_policy(256, 256, 1024).get("BN") == 64
a = torch.randn(256, 1024, device=d, generator=g)
b = torch.randn(1024, 256, device=d, generator=g)
c = torch.full((256, 256), float("nan"), device=d)
gemm_fp32.launch(a, b, c, SWAP=0)
torch.cuda.synchronize()
ref = a.double() @ b.double()
err = float((c.double() - ref).norm() / ref.norm())
print("fp32 BN=64 unsplit rel err", err, flush=True)
assert err < 3e-7, err
print("ok")
