"""The fused ops' newer variants at small, ragged sizes, for compute-sanitizer: the streaming rotary kernels
(both styles, several tokens a block, partial rotary, odd head counts), rotary_neox's EARLY_K / KVEC, and the
row kernels' WARP_SUMS (layer_norm one and two rows a block, fused_add_rmsnorm), layer_norm_ring, rotary_ring:

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_fused_ops.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_fused_ops.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from stdlib_kernels import llm_ops as L  # noqa: E402


def run(device="cuda", ring_only=False):
    bf = torch.bfloat16
    for neox in (() if ring_only else (True, False)):
        for t, hq, hk, hs, rot, stream, threads in ((300, 32, 8, 128, 128, 1, 256), (7, 6, 1, 64, 32, 2, 128),
                                                     (5, 3, 3, 80, 80, 1, 64)):
            pos = torch.randint(0, 64, (t,), device=device)
            cs = torch.randn(64, rot, device=device)
            q, k = torch.randn(t, hq * hs, device=device).to(bf), torch.randn(t, hk * hs, device=device).to(bf)
            L.launch_rotary(pos, q, k, cs, hs, neox, stream=stream, THREADS=threads)
            L.launch_rotary(pos, q, k, cs, hs, neox, q_out=torch.empty_like(q), k_out=torch.empty_like(k),
                            stream=stream, THREADS=threads, MIN_BLOCKS=3 if threads == 256 else 0)
            if neox:
                L.launch_rotary(pos, q, k, cs, hs, neox, stream=stream, THREADS=threads, PREFETCH=True)
                for hpb, th in ((16, 64), (None, 128), (2, 32)):   # rotary_neox_rows: neox from whole heads
                    L.launch_rotary(pos, q, k, cs, hs, neox, heads_per_block=hpb, THREADS=th, HALVES=True)
    pos = torch.randint(0, 64, (9,), device=device)
    cs = torch.randn(64, 128, device=device)
    q, k = torch.randn(9, 32 * 128, device=device).to(bf), torch.randn(9, 8 * 128, device=device).to(bf)
    for kw in (() if ring_only else (dict(THREADS=128, EARLY_K=True, KVEC=4), dict(THREADS=256, EARLY_K=True, KVEC=2),
                                     dict(THREADS=256, KVEC=2))):
        L.launch_rotary(pos, q, k, cs, 128, True, **kw)
    x, r, w, b = (torch.randn(*s, device=device).to(bf) for s in ((19, 4096), (19, 4096), (4096,), (4096,)))
    for ws in (() if ring_only else (False, True)):
        L.launch_layer_norm(x, w, b, torch.empty_like(x), 1e-5, WARP_SUMS=ws)
        L.launch_layer_norm(x, w, b, torch.empty_like(x), 1e-5, ROWS=2, WARP_SUMS=ws)
        L.launch_fused_add_rmsnorm(x, r, w, torch.empty_like(x), torch.empty_like(x), 1e-6, WARP_SUMS=ws)
    for m, n, stages, bps in ((300, 4096, 3, 1), (7, 1024, 4, 2), (700, 2048, 2, 2)):   # layer_norm_ring
        x = torch.randn(m, n, device=device).to(bf)
        wn, bn = torch.randn(n, device=device).to(bf), torch.randn(n, device=device).to(bf)
        L.launch_layer_norm_ring(x, wn, bn, torch.empty_like(x), 1e-5, blocks_per_sm=bps, STAGES=stages)
    for neox in (True, False):                                                   # rotary_ring
        for t, hq, hk, hs, rot, bps, th, st in ((300, 32, 8, 128, 128, 2, 512, 3), (7, 6, 1, 64, 32, 2, 64, 2),
                                                 (5, 3, 3, 80, 16, 1, 32, 4)):
            pos = torch.randint(0, 64, (t,), device=device)
            cs = torch.randn(64, rot, device=device)
            q, k = torch.randn(t, hq * hs, device=device).to(bf), torch.randn(t, hk * hs, device=device).to(bf)
            L.launch_rotary_ring(pos, q, k, cs, hs, neox, blocks_per_sm=bps, THREADS=th, STAGES=st, CS_SMEM=False)
            L.launch_rotary_ring(pos, q, k, cs, hs, neox, blocks_per_sm=bps, THREADS=th, STAGES=st, CS_SMEM=True)
    if device == "cuda":
        torch.cuda.synchronize()


if __name__ == "__main__":
    run(ring_only="--ring" in sys.argv)      # --ring: layer_norm_ring and rotary_ring alone
    print("ok")
