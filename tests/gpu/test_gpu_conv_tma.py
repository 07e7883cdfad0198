"""The TMA-fed convolution (stdlib_kernels/conv_tma.py) on a real GPU against torch in float64: 3x3 padded,
1x1, asymmetric/dilated with an H stride, 3-D, 1-D, grouped, output rows of several segments, both precisions
(3xTF32 at fp32 accuracy, one TF32 pass at TF32 accuracy). Outputs are poisoned with NaN first. Skips without
a GPU."""

from __future__ import annotations

import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
if not torch.cuda.is_available():
    pytest.skip(
        "no CUDA GPU here (torch.cuda.is_available() is False): GPU tests need the device machine",
        allow_module_level=True,
    )

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from stdlib_kernels import conv_igemm, conv_tma  # noqa: E402

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")

CASES = [
    ((4, 64, 40, 36), (128, 64, 3, 3), 1, 1, 1, 1),
    ((2, 48, 17, 200), (96, 48, 1, 1), 1, 0, 1, 1),
    ((2, 32, 33, 70), (64, 32, 3, 7), (2, 1), (1, 3), (1, 2), 1),
    ((1, 32, 9, 20, 20), (64, 32, 3, 3, 3), 1, 1, 1, 1),
    ((2, 24, 500), (40, 24, 5), 1, 2, 1, 1),
    ((2, 128, 30, 30), (256, 32, 3, 3), 1, 1, 1, 4),
    ((3, 64, 20, 24), (320, 64, 1, 1), 1, 0, 1, 1),
    ((2, 32, 12, 50), (200, 32, 3, 3), 1, 1, 1, 1),
    ((2, 32, 66, 70), (64, 32, 3, 3), 2, 2, 2, 1),                        # W stride: to_ndhwc_phased
    ((1, 16, 9, 40, 36), (32, 16, 3, 5, 5), (1, 2, 2), (1, 2, 2), 1, 1),
]


@pytest.mark.parametrize("split", [True, False])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{len(c[0]) - 2}d_k{'x'.join(map(str, c[1][2:]))}_g{c[5]}")
def test_conv_tma_on_gpu(case, split):
    xs, ws, stride, padding, dilation, groups = case
    g = torch.Generator().manual_seed(sum(xs))
    x, w = torch.randn(xs, generator=g), torch.randn(ws, generator=g)
    ref = torch.as_tensor(conv_igemm.reference(x.numpy(), w.numpy(), stride, padding, dilation, groups))
    y = torch.full(tuple(ref.shape), float("nan"), device=DEV)
    conv_tma.launch(x.to(DEV), w.to(DEV), y, stride, padding, dilation, groups, split=split)
    torch.cuda.synchronize()
    out = y.cpu().double()
    assert not out.isnan().any()
    err = (out - ref).abs().max().item() / ref.abs().max().item()
    assert err < (1e-5 if split else 3e-3), err


@pytest.mark.parametrize("split", [True, False])
def test_conv_tma_reads_a_shared_copy_at_an_offset(split):
    """A transposed convolution's phase: the channels-last copy is padded more than this convolution needs (as
    the copy all phases share is), the convolution reads it at OFF = the copy's left padding - its own."""
    g = torch.Generator().manual_seed(11)
    x, w = torch.randn((2, 32, 19, 150), generator=g), torch.randn((48, 32, 2, 2), generator=g)
    ref = torch.as_tensor(conv_igemm.reference(x.numpy(), w.numpy(), 1, 1, 1, 1))
    y = torch.full(tuple(ref.shape), float("nan"), device=DEV)
    conv_tma.launch(x.to(DEV), w.to(DEV), y, 1, 1, 1, 1, split=split, copy=((0, 2, 3), (1, 24, 156)))
    torch.cuda.synchronize()
    out = y.cpu().double()
    assert not out.isnan().any()
    err = (out - ref).abs().max().item() / ref.abs().max().item()
    assert err < (1e-5 if split else 3e-3), err
