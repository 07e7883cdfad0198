"""Run issue 19's kernels once on small ragged inputs, for compute-sanitizer (see device_run.sh):

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gather.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gather.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.dirname(__file__))

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import conv, embedding, max_pool, scatter_add  # noqa: E402

d = torch.device("cuda")
L = tilepy_hip.launch
w, ids = torch.randn(50, 70, device=d), torch.randint(0, 50, (37,), device=d)
L(embedding.embedding, (tp.cdiv(37, 16),), w, ids, torch.empty(37, 70, device=d))
x, index = torch.randn(37, 70, device=d), torch.randint(0, 9, (37,), device=d)
L(scatter_add.scatter_add, (tp.cdiv(37, 16),), x, index, torch.zeros(9, 70, device=d))
xp = torch.randn(6, 37, 29, device=d)
for pad in (0, 1):
    oh, ow = max_pool.out_size(37, pad=pad), max_pool.out_size(29, pad=pad)
    L(max_pool.max_pool2d, (tp.cdiv(ow, 16), tp.cdiv(oh, 16), 6), xp, torch.empty(6, oh, ow, device=d), PAD=pad)
xc = torch.randn(2, 6, 19, 14, device=d).bfloat16()
for preset in ("sm_90a", "sm_80"):
    p = {**conv.PRESETS[preset], "S": 2, "P": 1, "D": 2}
    oh, ow = conv.conv2d_out(19, 3, 2, 1, 2), conv.conv2d_out(14, 3, 2, 1, 2)
    L(conv.conv2d, (tp.cdiv(ow, 8), tp.cdiv(oh, 8), 2), xc, torch.randn(36, 6, 3, 3, device=d).bfloat16(),
      torch.empty(2, 36, oh, ow, device=d), target="sm_90a", **p)
    p = {**conv.PRESETS[preset], "S": 2, "P": 0, "D": 1}
    oh, ow = conv.conv_transpose2d_out(19, 3, 2, 0, 1), conv.conv_transpose2d_out(14, 3, 2, 0, 1)
    L(conv.conv_transpose2d, (tp.cdiv(ow, 8), tp.cdiv(oh, 8), 2), xc, torch.randn(6, 33, 3, 3, device=d).bfloat16(),
      torch.empty(2, 33, oh, ow, device=d), target="sm_90a", **p)
from test_gpu_gather_kernels import _atomics, carried, tile_ops  # noqa: E402

from stdlib_kernels import cumsum  # noqa: E402

xs = torch.randn(32, 64, device=d)
L(tile_ops, (1,), xs, torch.empty(32, device=d), torch.empty(3, 64, dtype=torch.int32, device=d),
  torch.empty(4, 32, 64, device=d), torch.empty(64, 32, device=d), torch.empty(16, 128, device=d))
for dt, tdt in ((tp.f32, torch.float32), (tp.bf16, torch.bfloat16), (tp.i32, torch.int32)):
    n, m = 1000, 13
    L(_atomics(dt), (tp.cdiv(n, 256),), torch.ones(n, device=d).to(tdt),
      torch.randint(0, m, (n,), device=d, dtype=torch.int32), *(torch.zeros(m, device=d).to(tdt) for _ in range(4)),
      torch.zeros(n, dtype=torch.int32, device=d))
for move in (True, False):
    L(carried, (1,), torch.randn(64, device=d).bfloat16(), torch.empty(4, 64, device=d).bfloat16(), 3, MOVE=move)
xv = torch.randn(3000, device=d)
part = torch.empty(3, device=d)
L(cumsum.block_sums, (3,), xv, part)
L(cumsum.block_scan, (3,), xv, part, torch.empty(3000, device=d))
torch.cuda.synchronize()
print("sanitize_gather.py: all kernels ran")
