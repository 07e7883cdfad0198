"""fp32 attention at small, ragged sizes (head dims 32/64/128, causal and not, GQA, the policy and its
alternatives), for compute-sanitizer:

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_attention_fp32.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_attention_fp32.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from stdlib_kernels import attention_fp32  # noqa: E402

CASES = [(64, False, (2, 1, 200, 333), {}), (64, True, (2, 2, 257, 250), {}), (128, True, (2, 1, 130, 70), {}),
         (32, False, (3, 3, 100, 203), {}), (64, True, (2, 1, 190, 190), dict(STAGES=3, PBUF=1)),
         (64, False, (2, 2, 100, 150), dict(CONSUMERS=1, STAGES=4)), (128, False, (2, 2, 100, 150), dict(PROMOTE=True)),
         (128, True, (2, 1, 130, 70), dict(LOLO=True, PV_LOLO=True)), (128, True, (2, 1, 130, 70), dict(PIECES=True))]


def run(device="cuda"):
    for hd, causal, (bh, bhkv, sq, sk), cfg in CASES:
        q = torch.randn(bh, sq, hd, device=device)
        k = torch.randn(bhkv, sk, hd, device=device)
        v = torch.randn(bhkv, sk, hd, device=device)
        o = torch.empty_like(q)
        lse = torch.empty(bh, sq, device=device)
        attention_fp32.launch(q, k, v, o, lse, causal=causal, **cfg)
        if device == "cuda":
            torch.cuda.synchronize()
            assert torch.isfinite(o).all()


if __name__ == "__main__":
    run()
    print("ok")
