"""gemm_fp32's G36 forms for compute-sanitizer: launch_policy's 128 x 96 and 128 x 64 tiles with TMA_ONLY (ragged M, N
and K; through launch on a pretended small GPU so the policy picks them at small shapes), the same with an A whose
base is 4 bytes off 16 (TMA_ONLY dropped), and the "kn" swap with TMA_ONLY and register budgets (split and unsplit,
ragged, a weight 4 bytes off 16); each output checked against float64.

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_fp32_waves.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_fp32_waves.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from stdlib_kernels import gemm_fp32  # noqa: E402

d = torch.device("cuda")
g = torch.Generator(device="cuda").manual_seed(0)


def offset(shape):
    n = shape[0] * shape[1]
    return torch.randn(n + 1, device=d, generator=g)[1:].view(*shape)


def check(name, a, b, c):
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    err = float((c.double() - ref).norm() / ref.norm())
    print(name, tuple(a.shape), tuple(b.shape), "rel err", err, flush=True)
    assert err < 3e-7, err


gemm_fp32.SMS = 4       # 256 x 300: 6 tiles 128 wide or 8 tiles 96 wide, 2 waves either way: the 96-wide form
for m, n, k, bn in ((256, 300, 264, 96), (250, 301, 260, 96), (256, 256, 1024, 64), (130, 100, 520, 64)):
    if bn == 64:    # 128 x 64 tiles over half a wave of 8 SMs, then (130 x 100 on 16) SMALL_64's 64 x 64 tiles
        gemm_fp32.SMS = 8 if m == 256 else 16
    assert gemm_fp32.launch_policy(m, n, k).get("BN") == bn, gemm_fp32.launch_policy(m, n, k)
    for off in (False, True):
        a = offset((m, k)) if off else torch.randn(m, k, device=d, generator=g)
        b = torch.randn(k, n, device=d, generator=g)
        c = torch.full((m, n), float("nan"), device=d)
        gemm_fp32.launch(a, b, c, SWAP=0)
        check(f"fp32 BN={bn} offset={off}", a, b, c)
gemm_fp32.SMS = 132
print("ok")

for m, n, k in ((100, 520, 1032), (130, 264, 516)):     # the nk swap at 128 columns: TMA_ONLY + register budgets
    x = torch.randn(m, k, device=d, generator=g)
    w = torch.randn(n, k, device=d, generator=g)
    c = torch.full((m, n), float("nan"), device=d)
    gemm_fp32.launch(x, w, c, b_layout="nk", SWAP=1)
    check("fp32 nk swap", x, w.t(), c)
print("ok")

for m, n, k, extra in ((128, 520, 1032, {}), (100, 264, 2000, dict(KSPLIT=3)), (130, 200, 516, {}),
                       (128, 1000, 1000, dict(TMA_ONLY=1, PRODUCER_REGS=0, CONSUMER_REGS=0))):
    for off in (False, True) if "TMA_ONLY" not in extra else (False,):    # (a caller's own TMA_ONLY stands)
        x = torch.randn(m, k, device=d, generator=g)
        b = offset((k, n)) if off else torch.randn(k, n, device=d, generator=g)
        c = torch.full((m, n), float("nan"), device=d)
        gemm_fp32.launch(x, b, c, b_layout="kn", SWAP=1, **extra)
        check(f"fp32 kn swap {extra} offset={off}", x, b, c)
print("ok")
