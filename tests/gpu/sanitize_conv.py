"""The implicit-GEMM convolution on small ragged shapes (gathered A tiles, TMA weight tiles, masked scatters):
direct and grouped in 3xTF32, transposed in one TF32 pass, for compute-sanitizer:

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_conv.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_conv.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from stdlib_kernels import conv_igemm  # noqa: E402

d = torch.device("cuda")
x = torch.randn(2, 12, 13, 11, device=d)
conv_igemm.launch(x, torch.randn(40, 6, 3, 3, device=d), torch.empty(2, 40, 7, 6, device=d), 2, 1, 1, 2, False)
conv_igemm.launch(x, torch.randn(12, 20, 3, 3, device=d), torch.empty(2, 40, 26, 22, device=d), 2, 1, 1, 2, True,
                  split=False)
torch.cuda.synchronize()
print("ok")
