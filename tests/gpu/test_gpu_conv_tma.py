"""The TMA-fed convolution (stdlib_kernels/conv_tma.py) on a real GPU against torch in float64: 3x3 padded,
1x1, asymmetric/dilated with an H stride, 3-D, 1-D, grouped, output rows of several segments, both precisions
(3xTF32 at fp32 accuracy, one TF32 pass at TF32 accuracy). Outputs are poisoned with NaN first. Skips without
a GPU."""

from __future__ import annotations

import pytest
from gpu_prologue import cuda_torch

torch = cuda_torch()

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


@pytest.mark.parametrize("staged", [0, 1])
@pytest.mark.parametrize("case", [CASES[1], CASES[2], CASES[5], CASES[7], CASES[9]],
                         ids=["1x1_ow200", "hstride", "grouped", "cout200", "3d_wstride"])
def test_conv_tma_staged_epilogue_on_gpu(case, staged):
    """STAGED=1 (the accumulator through shared memory, 16-byte stores along pixels) and STAGED=0 (stored from
    the registers) on the GPU, one TF32 pass: rows past a row's end, channels past Cout / G, groups, 3-D."""
    xs, ws, stride, padding, dilation, groups = case
    g = torch.Generator().manual_seed(sum(xs) + staged)
    x, w = torch.randn(xs, generator=g), torch.randn(ws, generator=g)
    ref = torch.as_tensor(conv_igemm.reference(x.numpy(), w.numpy(), stride, padding, dilation, groups))
    y = torch.full(tuple(ref.shape), float("nan"), device=DEV)
    conv_tma.launch(x.to(DEV), w.to(DEV), y, stride, padding, dilation, groups, split=False, STAGED=staged)
    torch.cuda.synchronize()
    out = y.cpu().double()
    assert not out.isnan().any()
    err = (out - ref).abs().max().item() / ref.abs().max().item()
    assert err < 3e-3, err


class _Projection(torch.nn.Module):
    """relu(bn(conv3x3 / S(x)) + bn(conv1x1 / S(x))): ResNet's / ResNeXt's downsampling block's end."""

    def __init__(self, ci, co, stride):
        super().__init__()
        nn = torch.nn
        self.conv, self.bn = nn.Conv2d(ci, co, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(co)
        self.short, self.bn_s = nn.Conv2d(ci, co, 1, stride=stride, bias=False), nn.BatchNorm2d(co)
        for b in (self.bn, self.bn_s):
            b.running_mean.uniform_(-0.5, 0.5)
            b.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)) + self.bn_s(self.short(x)))


@pytest.mark.parametrize("tf32", [False, True], ids=["fp32", "tf32"])
@pytest.mark.parametrize("xs,co,stride", [((4, 64, 56, 56), 128, 2), ((2, 32, 30, 34), 64, (2, 1))],
                         ids=["s2", "s21"])
def test_lowered_projection_block_on_gpu(tmp_path, xs, co, stride, tf32):
    """The lowered block on the GPU against float64: the strided 1x1 on its subsampled input (computed in
    conv_tma's copy), the 3x3's BN, the add and the relu in the 1x1's staged epilogue reading the 3x3's NCHW
    output; fp32 (3xTF32) at fp32 accuracy, TF32 as cuDNN's default."""
    import importlib.util
    import re

    from argus_agent.lower import lower_model, render_program

    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = tf32
    try:
        torch.manual_seed(3)
        model = _Projection(xs[1], co, stride).eval()
        x = torch.randn(xs)
        src = render_program(lower_model(model, [x], "sm_90a"))
    finally:
        torch.backends.cudnn.allow_tf32 = old
    host = src.split("def argus_forward")[1]
    assert "launch(conv_tma_e" in host and re.search(r"launch\(k\d+_ndhwc", host), "the subsampled copy"
    p = tmp_path / "projection.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location("gpu_projection", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        ref = model.double()(x.double())
        out = mod.argus_forward(model.float().to(DEV), x.to(DEV)).cpu().double()
    err = (out - ref).abs().max().item() / ref.abs().max().item()
    assert err < (3e-3 if tf32 else 1e-5), err


@pytest.mark.parametrize("tf32", [False, True], ids=["fp32", "tf32"])
def test_lowered_merged_groups_on_gpu(tmp_path, tf32, monkeypatch):
    """ARGUS_CONV_MERGE_GROUPS=1: ResNeXt's grouped 3x3 / 2 (8 channels a group) as conv_tma over merged groups
    of 32 channels with a block-diagonal weight, BN and ReLU fused, on the GPU against float64."""
    import importlib.util

    from argus_agent.lower import lower_model, ops_nn, render_program

    monkeypatch.setattr(ops_nn, "CONV_MERGE_GROUPS", True)
    nn = torch.nn
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = tf32
    try:
        torch.manual_seed(4)
        model = nn.Sequential(nn.Conv2d(128, 128, 3, stride=2, padding=1, groups=16, bias=False),
                              nn.BatchNorm2d(128), nn.ReLU()).eval()
        x = torch.randn(4, 128, 28, 30)
        src = render_program(lower_model(model, [x], "sm_90a"))
    finally:
        torch.backends.cudnn.allow_tf32 = old
    assert "launch(conv_tma_e" in src and "launch(conv_igemm" not in src
    p = tmp_path / "merged.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location("gpu_merged", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        ref = model.double()(x.double())
        out = mod.argus_forward(model.float().to(DEV), x.to(DEV)).cpu().double()
    err = (out - ref).abs().max().item() / ref.abs().max().item()
    assert err < (3e-3 if tf32 else 1e-5), err
