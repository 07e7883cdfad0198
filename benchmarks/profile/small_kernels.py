"""One launch each of the kernels whose small-shape speed is short of the peers (for `ncu`): the 1024^3 bf16
GEMM under gemm_hopper's small policy, and attention at D=64, S=512, causal under its policy. Run as

    ncu --set full -k regex:'gemm|attention' --launch-skip 2 --launch-count 2 \
        python3 benchmarks/profile/small_kernels.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from stdlib_kernels import attention, gemm_hopper  # noqa: E402

a = torch.randn(1024, 1024, device="cuda").bfloat16()
b = torch.randn(1024, 1024, device="cuda").bfloat16()
c = torch.empty(1024, 1024, device="cuda").bfloat16()
q = torch.randn(32 * 32, 512, 64, device="cuda").bfloat16()
k = torch.randn(32 * 32, 512, 64, device="cuda").bfloat16()
v = torch.randn(32 * 32, 512, 64, device="cuda").bfloat16()
o = torch.empty_like(q)
lse = torch.empty(32 * 32, 512, device="cuda")
for _ in range(2):
    gemm_hopper.launch(a, b, c)
    attention.launch(q, k, v, o, lse, causal=True)
torch.cuda.synchronize()
print("ok")
