"""split_tf32_tw (G38: a "kn" B's transposed split in register-transposed (32, 128) tiles) for compute-sanitizer: ragged
K and N, N not a multiple of 4, a base 4 bytes off 16, a batch; each against split_tf32_t bit for bit, then launch
through it against float64.

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm_fp32_split.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm_fp32_split.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from stdlib_kernels import gemm_fp32  # noqa: E402

d = torch.device("cuda")
g = torch.Generator(device="cuda").manual_seed(0)
for z, k, n, off in ((1, 70, 45, False), (2, 33, 130, True), (1, 257, 300, True), (1, 128, 256, False)):
    base = torch.randn(z * k * n + 1, device=d, generator=g)
    x = (base[1:] if off else base[:-1]).view(z, k, n)
    kp = -(-k // 4) * 4
    h0, l0, h1, l1 = (torch.full((z, n, kp), float("nan"), device=d) for _ in range(4))
    gemm_fp32.split_tf32_t[(-(-kp // 32), -(-n // 32), z)](x, h0, l0)
    gemm_fp32.split_tf32_tw[(-(-kp // 32), -(-n // 128), z)](x, h1, l1)
    torch.cuda.synchronize()
    assert torch.equal(h0, h1) and torch.equal(l0, l1), (z, k, n, off)
    print("split_tf32_tw", (z, k, n), "offset", off, "equal", flush=True)
for m, n, k in ((300, 130, 70), (260, 301, 264)):
    a = torch.randn(m, k, device=d, generator=g)
    b = torch.randn(k, n, device=d, generator=g)
    c = torch.full((m, n), float("nan"), device=d)
    gemm_fp32.launch(a, b, c, SWAP=0)
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    err = float((c.double() - ref).norm() / ref.norm())
    print("launch kn", (m, n, k), "rel err", err, flush=True)
    assert err < 3e-7, err
print("ok")
