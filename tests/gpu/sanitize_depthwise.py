"""Run stdlib_kernels/depthwise_conv.py once on small ragged inputs, for compute-sanitizer:

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_depthwise.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_depthwise.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from stdlib_kernels import depthwise_conv as dw  # noqa: E402

d = torch.device("cuda")
for shape, k, s, pad, dil in (((2, 3, 19, 23), (7, 7), 1, (3, 3), 1), ((1, 5, 30, 17), (7, 5), 2, (3, 1), 1),
                              ((1, 4, 9, 70), (9, 9), 1, (4, 4), 1), ((2, 6, 14, 14), (7, 7), 1, (3, 3), 1),
                              ((1, 8, 7, 9), (3, 3), 1, (1, 1), 1), ((1, 4, 29, 30), (3, 3), 2, (1, 1), 1)):
    x = torch.randn(shape, device=d)
    w = torch.randn(shape[1], 1, *k, device=d)
    oh, ow = (dw.out_size(n, kk, s, p, dil) for n, kk, p in zip(shape[2:], k, pad))
    y = torch.empty(shape[0], shape[1], oh, ow, device=d)
    dw.launch(x, w, y, s, pad, dil)
    dw.launch(x, w, y, s, pad, dil, staged=True)   # the shared-memory form (staged_tile), where it fits
torch.cuda.synchronize()
print("depthwise sanitize cases ran")
