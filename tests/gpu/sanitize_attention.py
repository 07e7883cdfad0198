"""Forward attention at small, ragged sizes (both head dims, causal and not, GQA), for compute-sanitizer:

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_attention.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_attention.py [--policy]   (--policy: launch's
policy table alone, both shape classes, not the sweep's alternatives; --paired: the PAIRED cases alone)
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from stdlib_kernels import attention  # noqa: E402

d = torch.device("cuda")
CASES = [(128, False, (2, 1, 200, 333), {}), (64, True, (2, 2, 257, 257), {}), (128, True, (1, 1, 130, 70), {}),
         (64, False, (2, 1, 200, 333), {}), (64, True, (2, 1, 1100, 1100), {}),
         (128, False, (2, 1, 1100, 1100), {})]  # the launch policy, both shape classes
if "--policy" not in sys.argv:  # the policy table's alternatives (benchmarks/attention.py --sweep) too
    CASES += [(64, causal, (2, 1, 257, 333), cfg) for causal in (False, True)
              for cfg in (dict(attention.THREE_CONSUMERS), {**attention.THREE_CONSUMERS, "PIPELINE": True},
                          dict(BN=256, STAGES=3))]
    CASES += [(128, True, (2, 1, 257, 333), cfg) for cfg in (dict(BN=64, STAGES=4), dict(STAGES=2))]
    CASES += [(64, causal, (2, 1, 450, 450), cfg) for causal in (False, True)      # PAIRED: 4 and 3 row blocks
              for cfg in (dict(PAIRED=True, PIPELINE=False), dict(attention.THREE_CONSUMERS, PAIRED=True))]
    CASES += [(128, True, (2, 1, 300, 257), dict(PAIRED=True, PIPELINE=False, STAGES=2))]
if "--decode" in sys.argv:  # split-KV decoding alone
    CASES = []
if "--paired" in sys.argv:  # PAIRED alone (two row blocks a block through one ring)
    CASES = [c for c in CASES if c[3].get("PAIRED")]
for hd, causal, (bh, bhkv, sq, sk), cfg in CASES:
    q = torch.randn(bh, sq, hd, device=d).bfloat16()
    k = torch.randn(bhkv, sk, hd, device=d).bfloat16()
    v = torch.randn(bhkv, sk, hd, device=d).bfloat16()
    o = torch.empty_like(q)
    lse = torch.empty(bh, sq, device=d)
    attention.launch(q, k, v, o, lse, causal=causal, **cfg)
    torch.cuda.synchronize()
    assert torch.isfinite(o.float()).all()
# split-KV decoding: several splits + the merge, and one split (the bf16 output written by the kernel); at d 64
# with one warpgroup the default ring is 256-key tiles (decode_ring), 128-key tiles where the splits need them
for hd, causal, (bh, bhkv, qlen, sk), splits, cfg in (() if "--paired" in sys.argv else (
        (128, False, (8, 2, 1, 700), 3, {}), (64, True, (8, 2, 4, 333), 2, {}), (128, False, (8, 2, 1, 700), 1, {}),
        (64, True, (4, 1, 4, 300), 1, {}), (64, False, (8, 2, 1, 1500), 1, dict(BN=128, STAGES=6)),   # ring variants
        (128, False, (8, 2, 1, 1500), 2, dict(BN=64, STAGES=6)))):
    q = torch.randn(bh, qlen, hd, device=d).bfloat16()
    k = torch.randn(bhkv, sk, hd, device=d).bfloat16()
    v = torch.randn(bhkv, sk, hd, device=d).bfloat16()
    o = torch.empty_like(q)
    lse = torch.empty(bh, qlen, device=d)
    attention.decode(q, k, v, o, lse, causal=causal, splits=splits, **cfg)
    torch.cuda.synchronize()
    assert torch.isfinite(o.float()).all()
print("ok")
