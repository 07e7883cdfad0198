"""ncu driver (G24): fp8 skinny at 16 and 128 x 4096 x 4096: the policy (gemm_fp8_swap, one consumer), K_WAYS=2 (two
consumers on one 64-column tile) and torch._scaled_mm, each warmed up 3 times, then one call each between
cudaProfilerStart / Stop, so `ncu --profile-from-start off` sees exactly those six kernels (plus the peer's own).
    python benchmarks/profile/g24_ncu_driver.py"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from stdlib_kernels import gemm_fp8  # noqa: E402

g = torch.Generator(device="cuda").manual_seed(0)
runs = []
for M in (16, 128):
    N = K = 4096
    a = (torch.randn(M, K, device="cuda", generator=g) * 8).to(torch.float8_e4m3fn)
    b = (torch.randn(N, K, device="cuda", generator=g) * 8).to(torch.float8_e4m3fn)
    sa = torch.full((1,), 0.5, device="cuda")
    sb = torch.full((1,), 0.25, device="cuda")
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    pol = gemm_fp8.swap_policy(M, N, K)
    kw = gemm_fp8.swap_params(M, N, K, k_ways=2, cluster=2, BM=pol["BM"])
    for tag, p in (("policy", pol), ("kways", kw)):
        runs.append((f"{M} rows {tag} {({k: p[k] for k in ('BM', 'BN', 'STAGES', 'CLUSTER_K', 'K_WAYS')})}",
                     lambda a=a, b=b, sa=sa, sb=sb, out=out, p=p: gemm_fp8.launch(a, b, sa, sb, out, **p)))
    runs.append((f"{M} rows torch._scaled_mm", lambda a=a, b=b, sa=sa, sb=sb: torch._scaled_mm(
        a, b.t(), sa, sb, out_dtype=torch.bfloat16)))
for _, fn in runs:
    for _ in range(3):
        fn()
torch.cuda.synchronize()
torch.cuda.profiler.start()
for name, fn in runs:
    print("profiled:", name, flush=True)
    fn()
    torch.cuda.synchronize()
torch.cuda.profiler.stop()
