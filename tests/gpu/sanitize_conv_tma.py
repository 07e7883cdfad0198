"""The TMA-fed convolution on small ragged shapes (the channels-last copy with its zero padding, bulk tensor
copies of A and B, masked row segments), 3xTF32 and one TF32 pass, for compute-sanitizer:

compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_conv_tma.py
compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_conv_tma.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from stdlib_kernels import conv_tma  # noqa: E402

d = torch.device("cuda")
x = torch.randn(2, 20, 13, 70, device=d)
conv_tma.launch(x, torch.randn(40, 20, 3, 3, device=d), torch.empty(2, 40, 13, 70, device=d), 1, 1, 1, 1)
conv_tma.launch(x, torch.randn(24, 20, 1, 1, device=d), torch.empty(2, 24, 13, 70, device=d), split=False)
x = torch.randn(1, 64, 5, 7, 9, device=d)
conv_tma.launch(x, torch.randn(64, 32, 3, 3, 3, device=d), torch.empty(1, 64, 3, 5, 7, device=d), groups=2,
                split=False)
x = torch.randn(2, 16, 11, 21, device=d)
conv_tma.launch(x, torch.randn(24, 16, 3, 3, device=d), torch.empty(2, 24, 6, 11, device=d), 2, 2, 2)
# a phase of a transposed convolution: the copy shared with other phases is padded more than this one needs,
# the convolution reads it at an offset (OFF = the copy's left padding - its own)
x = torch.randn(2, 32, 9, 21, device=d)
conv_tma.launch(x, torch.randn(16, 32, 2, 2, device=d), torch.empty(2, 16, 10, 22, device=d), 1, 1, 1, 1,
                split=False, copy=((0, 2, 2), (1, 13, 25)))
torch.cuda.synchronize()
print("ok")
