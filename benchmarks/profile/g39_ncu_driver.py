"""ncu driver (G39): fp8 at 96 / 128 x 4096 x 4096 (the skinny policy, G39's relaxed CLUSTER_M=2 form, and
torch._scaled_mm) and at the mid shapes 4096 x 1024 x 1024 and 1536^3 (the policy and torch._scaled_mm). Each function
is warmed up 3 times, then called once between cudaProfilerStart / Stop, so `ncu --profile-from-start off` sees exactly
those kernels; under ncu's default cache control every kernel starts with the L2 flushed (B from DRAM, as the rotated
timings read it).
    python benchmarks/profile/g39_ncu_driver.py"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from g39_forms import cm_forms  # noqa: E402

from stdlib_kernels import gemm_fp8  # noqa: E402


def _quantize(x):
    scale = (x.abs().max().float() / 448.0).clamp(min=1e-12)
    return (x / scale).to(torch.float8_e4m3fn), scale.reshape(1)


g = torch.Generator(device="cuda").manual_seed(39)
runs = []
for (M, N, K), extra in (((96, 4096, 4096), True), ((128, 4096, 4096), True), ((4096, 1024, 1024), False),
                         ((1536, 1536, 1536), False)):
    a, sa = _quantize(torch.randn(M, K, device="cuda", generator=g))
    b, sb = _quantize(torch.randn(N, K, device="cuda", generator=g))
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    forms = {"policy": gemm_fp8.policy(M, N, K)}
    if extra:
        forms["cm_rel"] = cm_forms(M, N, K)["cm_rel"]
    for tag, p in forms.items():
        keys = ("BM", "BN", "STAGES", "CLUSTER_K", "CLUSTER_M", "K_WAYS", "HALF_SUM", "STORE_T", "RELAXED",
                "PERSISTENT")
        runs.append((f"{M}x{N}x{K} {tag} {({k: p[k] for k in keys if k in p})}",
                     lambda a=a, b=b, sa=sa, sb=sb, out=out, p=p: gemm_fp8.launch(a, b, sa, sb, out, **p)))
    runs.append((f"{M}x{N}x{K} torch._scaled_mm", lambda a=a, b=b, sa=sa, sb=sb: torch._scaled_mm(
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
