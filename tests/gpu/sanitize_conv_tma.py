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
# the accumulator stored from the registers (STAGED=0) beside the default staged epilogue
x = torch.randn(2, 20, 13, 70, device=d)
conv_tma.launch(x, torch.randn(40, 20, 3, 3, device=d), torch.empty(2, 40, 13, 70, device=d), 1, 1, 1, 1,
                split=False, STAGED=0)
# a lowered projection block: the strided 1x1 on its subsampled input (the generated copy), the 3x3's BN, the
# add and the relu in the 1x1's staged epilogue (reading the 3x3's NCHW output)
if len(sys.argv) < 2 or sys.argv[1] != "--no-lowering":
    import importlib.util
    import tempfile

    from argus_agent.lower import lower_model, render_program

    class Projection(torch.nn.Module):
        def __init__(self, ci, co):
            super().__init__()
            nn = torch.nn
            self.conv, self.bn = nn.Conv2d(ci, co, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(co)
            self.short, self.bn_s = nn.Conv2d(ci, co, 1, stride=2, bias=False), nn.BatchNorm2d(co)

        def forward(self, x):
            return torch.relu(self.bn(self.conv(x)) + self.bn_s(self.short(x)))

    model = Projection(32, 48).eval()
    xc = torch.randn(2, 32, 18, 22)
    src = render_program(lower_model(model, [xc], "sm_90a"))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "projection.py")
        with open(path, "w") as f:
            f.write(src)
        spec = importlib.util.spec_from_file_location("sanitize_projection", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        with torch.no_grad():
            out = mod.argus_forward(model.to(d), xc.to(d))
            assert (out - model(xc.to(d))).abs().max().item() < 1e-2
torch.cuda.synchronize()
print("ok")
