"""stdlib_kernels/depthwise_conv.py on a real GPU against float64 (and the lowering's use of it through a
ConvNeXt-shaped block). Skips without a GPU."""

from __future__ import annotations

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

from stdlib_kernels import depthwise_conv as dw  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")


@pytest.mark.parametrize("shape,k,s,pad,d", [
    ((16, 96, 56, 56), (7, 7), 1, (3, 3), 1),
    ((3, 5, 30, 17), (7, 5), 2, (3, 1), 1),
    ((2, 7, 21, 90), (9, 9), 1, (4, 4), 2),
    ((4, 64, 14, 14), (7, 7), 1, (3, 3), 1),
    ((3, 24, 7, 7), (3, 3), 1, (1, 1), 1),
    ((2, 12, 29, 30), (3, 3), 2, (1, 1), 1),
    ((2, 10, 25, 25), (5, 5), 2, (2, 2), 1),
])
@pytest.mark.parametrize("staged", [False, True])
def test_depthwise_on_gpu_matches_float64(shape, k, s, pad, d, staged):
    g = torch.Generator(device=DEV).manual_seed(sum(shape))
    x = torch.randn(shape, device=DEV, generator=g)
    w = torch.randn(shape[1], 1, *k, device=DEV, generator=g)
    oh, ow = (dw.out_size(n, kk, s, p, d) for n, kk, p in zip(shape[2:], k, pad))
    y = torch.full((shape[0], shape[1], oh, ow), float("nan"), device=DEV)
    dw.launch(x, w, y, s, pad, d, staged=staged)
    ref = torch.nn.functional.conv2d(x.double(), w.double(), None, s, pad, d, groups=shape[1])
    theirs = torch.nn.functional.conv2d(x, w, None, s, pad, d, groups=shape[1])
    ours_err = (y.double() - ref).abs().max().item()
    their_err = (theirs.double() - ref).abs().max().item()
    assert ours_err <= max(2 * their_err, 1e-5), (ours_err, their_err)
