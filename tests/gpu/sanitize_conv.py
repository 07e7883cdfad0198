"""The implicit-GEMM convolution on small ragged shapes (gathered A tiles, TMA weight tiles, masked scatters):
direct and grouped in 3xTF32, transposed in one TF32 pass, for compute-sanitizer:

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_conv.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_conv.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import tilepy as tp  # noqa: E402
from stdlib_kernels import conv_igemm  # noqa: E402

d = torch.device("cuda")
x = torch.randn(2, 12, 13, 11, device=d)
conv_igemm.launch(x, torch.randn(40, 6, 3, 3, device=d), torch.empty(2, 40, 7, 6, device=d), 2, 1, 1, 2, False)
conv_igemm.launch(x, torch.randn(12, 20, 3, 3, device=d), torch.empty(2, 40, 26, 22, device=d), 2, 1, 1, 2, True,
                  split=False)
# the small-tile configuration (one consumer warpgroup, 64 x 16 tiles, 4 stages), direct and transposed
small = dict(BM=64, CONSUMERS=1, BK=16, STAGES=4, SWIZZLE=tp.Swizzle(2, 2, 3))
conv_igemm.launch(x, torch.randn(40, 6, 3, 3, device=d), torch.empty(2, 40, 7, 6, device=d), 2, 1, 1, 2, False,
                  split=False, **small)
conv_igemm.launch(x, torch.randn(12, 20, 3, 3, device=d), torch.empty(2, 40, 26, 22, device=d), 2, 1, 1, 2, True,
                  **small)
torch.cuda.synchronize()
print("ok")
