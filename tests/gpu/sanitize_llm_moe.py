"""The fused LLM ops and the MoE layer once each on small inputs with partial tiles, for compute-sanitizer:

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_llm_moe.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_llm_moe.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from stdlib_kernels import llm_ops as L  # noqa: E402
from stdlib_kernels import moe  # noqa: E402

d = torch.device("cuda")
bf = torch.bfloat16
x = torch.randn(37, 2 * 1000, device=d).to(bf)
L.launch_silu_and_mul(x, torch.empty(37, 1000, device=d, dtype=bf))
x, r = torch.randn(19, 700, device=d).to(bf), torch.randn(19, 700, device=d).to(bf)
w, b = torch.randn(700, device=d).to(bf), torch.randn(700, device=d).to(bf)
L.launch_fused_add_rmsnorm(x, r, w, torch.empty_like(x), torch.empty_like(x), 1e-6)
L.launch_layer_norm(x, w, b, torch.empty_like(x), 1e-5)
for rows in (2, 4):                        # 19 rows: the last block's rows past M
    L.launch_layer_norm(x, w, b, torch.empty_like(x), 1e-5, ROWS=rows)
xe, we, be = x[:, :512].contiguous(), w[:512].contiguous(), b[:512].contiguous()   # rows of a power of two: EVEN
for th, rows in ((0, 1), (256, 1), (0, 2)):
    L.launch_layer_norm(xe, we, be, torch.empty_like(xe), 1e-5, ROWS=rows, THREADS=th)
L.launch_merge_attn_states_lse(*(torch.randn(37, 5, 100, device=d).to(bf) if i % 2 == 0 else
                                 torch.randn(37, 5, device=d) for i in range(4)),
                               torch.empty(37, 5, 100, device=d, dtype=bf), torch.empty(37, 5, device=d), BR=8)
po, so = torch.randn(37, 5, 100, device=d).to(bf), torch.randn(37, 5, 100, device=d).to(bf)
pl, sl = torch.randn(37, 5, device=d), torch.randn(37, 5, device=d)
L.launch_merge_attn_states_lse(po, pl, so, sl, torch.empty_like(po), torch.empty_like(pl))
pos = torch.randint(0, 64, (5,), device=d)
cs = torch.randn(64, 64, device=d)
for neox in (True, False):
    L.launch_rotary(pos, torch.randn(5, 6 * 80, device=d).to(bf), torch.randn(5, 2 * 80, device=d).to(bf), cs, 80,
                    neox)
    for hpb, th in ((8, 64), (4, 32)):    # blocks of heads (SPLIT)
        L.launch_rotary(pos, torch.randn(5, 6 * 80, device=d).to(bf), torch.randn(5, 2 * 80, device=d).to(bf), cs,
                        80, neox, heads_per_block=hpb, THREADS=th)
    L.launch_rotary(pos, torch.randn(5, 6 * 80, device=d).to(bf), torch.randn(5, 2 * 80, device=d).to(bf), cs, 80,
                    neox, THREADS=256, **({"EARLY_K": True} if neox else {}))
    if neox:                               # k tiles spread over all threads (KVEC)
        for kv, th in ((4, 128), (2, 256)):
            L.launch_rotary(pos, torch.randn(5, 6 * 80, device=d).to(bf), torch.randn(5, 2 * 80, device=d).to(bf), cs,
                            80, True, THREADS=th, EARLY_K=True, KVEC=kv)
if "--rotary" in sys.argv:
    torch.cuda.synchronize()
    print("ok")
    sys.exit(0)
for t, h, f, e, k in ((37, 256, 384, 8, 2), (300, 136, 200, 4, 3)):
    xm = torch.randn(t, h, device=d).to(bf)
    lg = torch.randn(t, e, device=d)
    w13 = (torch.randn(e, h, 2 * f, device=d) / 16).to(bf)
    w2 = (torch.randn(e, f, h, device=d) / 16).to(bf)
    moe.moe(xm, lg, w13, w2, k)
torch.cuda.synchronize()
print("ok")
