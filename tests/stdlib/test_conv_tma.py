"""The TMA-fed convolution (stdlib_kernels/conv_tma.py) on the CPU interpreter against torch in float64: 1x1,
3x3 padded, asymmetric and dilated kernels, a stride along H, 3-D, 1-D, groups, channels padded to BK, row
segments past the output row's end, 3xTF32 at fp32 accuracy and one TF32 pass as exactly the TF32-rounded
convolution. Outputs are poisoned with NaN first, so an element never written fails."""

import numpy as np
import pytest
import torch

from stdlib_kernels import conv_igemm, conv_tma
from tilepy.instructions import round_tf32

CASES = [
    # (x shape, w shape, stride, padding, dilation, groups, constexprs)
    ((2, 16, 5, 9), (8, 16, 3, 3), 1, 1, 1, 1, dict(STAGES=2)),            # 3x3 padded, channels == BK
    ((2, 20, 3, 7), (12, 20, 1, 1), 1, 0, 1, 1, {}),                       # 1x1, 20 channels padded to 32
    ((1, 32, 6, 70), (8, 32, 3, 1), 1, (1, 0), 1, 1, {}),                 # OW 70: two 64-pixel segments
    ((1, 16, 9, 8), (8, 16, 3, 2), (2, 1), (2, 0), (2, 3), 1, {}),        # H stride, dilation, asymmetric
    ((1, 16, 4, 5, 6), (8, 16, 3, 2, 3), 1, 1, 1, 1, dict(STAGES=2)),     # 3-D
    ((2, 16, 23), (8, 16, 5), 1, 2, 1, 1, {}),                            # 1-D
    ((1, 64, 5, 6), (16, 32, 3, 3), 1, 1, 1, 2, dict(STAGES=2)),          # grouped, 32 channels a group
    ((1, 16, 3, 5), (160, 16, 1, 1), 1, 0, 1, 1, {}),                      # two channel tiles of 128
    ((1, 16, 9, 13), (8, 16, 3, 3), 2, 2, 2, 1, {}),                      # W stride 2, dilation 2 (level1/091)
    ((1, 16, 3, 7, 11), (8, 16, 3, 5, 5), (1, 2, 2), (1, 2, 2), 1, 1, {}),  # 3-D, W stride 2 (level1/097)
    ((2, 16, 20), (8, 16, 4), 3, 1, 1, 1, {}),                            # 1-D, stride 3 (phases of unequal length)
]


def _ids(c):
    return f"{len(c[0]) - 2}d_k{'x'.join(map(str, c[1][2:]))}_g{c[5]}"


def _run(case, split):
    xs, ws, stride, padding, dilation, groups, cx = case
    rng = np.random.default_rng(sum(xs) + sum(ws))
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    ref = conv_igemm.reference(x, w, stride, padding, dilation, groups)
    y = np.full(ref.shape, np.nan, np.float32)
    conv_tma.launch(x, w, y, stride, padding, dilation, groups, split=split, **cx)
    assert not np.isnan(y).any(), "some output element was never written"
    return x, w, y, ref


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_conv_tma_3xtf32_is_fp32_accurate(case):
    x, w, y, ref = _run(case, split=True)
    xs, ws, stride, padding, dilation, groups, _ = case
    f32 = conv_igemm.reference(x, w, stride, padding, dilation, groups).astype(np.float32)
    assert np.abs(y - ref).max() <= 1e-5 * np.abs(ref).max()
    assert np.linalg.norm(y - ref) <= 4 * np.linalg.norm(f32 - ref) + 1e-7 * np.linalg.norm(ref)


@pytest.mark.parametrize("case", [CASES[1], CASES[3], CASES[6]], ids=_ids)
def test_conv_tma_single_tf32_matches_tf32_inputs(case):
    """SPLIT=False is one TF32 product: the convolution of the TF32-rounded inputs (up to f32 sums), and
    visibly not fp32-accurate."""
    x, w, y, ref = _run(case, split=False)
    xs, ws, stride, padding, dilation, groups, _ = case
    want = conv_igemm.reference(round_tf32(x), round_tf32(w), stride, padding, dilation, groups)
    scale = np.abs(ref).max()
    assert np.abs(y - want).max() <= 1e-5 * scale
    assert np.abs(y - ref).max() > 1e-5 * scale


@pytest.mark.parametrize("stride", [1, 2], ids=["s1", "wstride2"])
def test_conv_tma_reads_a_copy_padded_more_than_it_needs(stride):
    """A copy shared by several convolutions of one input (a transposed convolution's phases) is padded by the
    largest of their paddings and extends further right: each reads it at OFF = the copy's padding - its own."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 16, 6, 7)).astype(np.float32)
    w = rng.standard_normal((8, 16, 2, 3)).astype(np.float32)
    ref = conv_igemm.reference(x, w, stride, (0, 1), 1, 1)
    y = np.full(ref.shape, np.nan, np.float32)
    conv_tma.launch(x, w, y, stride, (0, 1), 1, 1, copy=((0, 2, 3), (1, 11, 14)))
    assert np.abs(y - ref).max() <= 1e-5 * np.abs(ref).max()
    with pytest.raises(ValueError, match="does not hold"):
        conv_tma.geometry(x.shape, w.shape, ref.shape, 1, (0, 3), 1, 1, ((0, 2, 2), (1, 11, 14)))


def test_conv_tma_applies_only_where_its_boxes_are_exact():
    """Direct convolutions with at least 16 channels per group (a multiple of 32 when grouped); the rest stays
    with conv_igemm, and launch refuses it with the reason."""
    assert conv_tma.applies((2, 64, 8, 8), (32, 64, 3, 3), 1, 1, 1, False)
    assert conv_tma.applies((2, 64, 8, 8), (32, 64, 3, 3), (2, 1), 1, 1, False)
    assert conv_tma.applies((2, 64, 8, 8), (32, 64, 3, 3), 2, 1, 1, False)            # W stride: phases
    assert not conv_tma.applies((2, 8, 8, 8), (32, 8, 3, 3), 1, 1, 1, False)          # 8 channels
    assert not conv_tma.applies((2, 64, 8, 8), (32, 16, 3, 3), 1, 1, 4, False)        # 16 channels a group
    assert not conv_tma.applies((2, 64, 8, 8), (64, 32, 3, 3), 1, 1, 1, True)         # transposed
    with pytest.raises(ValueError, match="conv_igemm"):
        conv_tma.launch(np.zeros((1, 8, 4, 4), np.float32), np.zeros((4, 8, 3, 3), np.float32),
                        np.zeros((1, 4, 2, 2), np.float32))


def test_conv_tma_weight_layout_torch_and_numpy():
    """weight_tma: column t * CIGP + ci holds w[g * COG + co, ci, tap t], zeros at the padded channels."""
    w = torch.randn(6, 3, 2, 2)
    geo = dict(CIGP=16)
    b = conv_tma.weight_tma(w, 2, geo)
    assert b.shape == (2, 3, 4 * 16)
    b4 = b.reshape(2, 3, 4, 16)
    assert torch.equal(b4[..., :3], w.reshape(2, 3, 3, 4).permute(0, 1, 3, 2))
    assert not b4[..., 3:].any()
    assert np.array_equal(conv_tma.weight_tma(w.numpy(), 2, geo), b.numpy())


@pytest.mark.parametrize("case", [
    ((16, 64, 128, 128), (128, 64, 3, 3), (16, 128, 128, 128), 1, 1, 1, 1, False),     # level1/090
    ((8, 32, 32, 64, 64), (64, 32, 3, 3, 3), (8, 64, 32, 64, 64), 1, 1, 1, 1, True),   # level1/096, 3xTF32
    ((16, 128, 64, 64), (256, 32, 3, 3), (16, 256, 64, 64), 1, 1, 1, 4, False),        # level1/093, grouped
    ((16, 32, 256, 256), (64, 32, 3, 3), (16, 64, 128, 128), 2, 2, 2, 1, False),       # level1/091, W stride
    ((16, 256, 56, 56), (512, 256, 1, 1), (16, 512, 56, 56), 1, 0, 1, 1, True),      # BM 128, 3xTF32: unstaged
], ids=["2d", "3d_split", "grouped", "strided", "1x1_split"])
def test_conv_tma_verifies_clean(case):
    """tilepy-verify, every check (the pipeline's included: both operands arrive by bulk copies), at real sizes:
    no two blocks write one output element, the ring's waits and arrivals pair up, wgmma layouts; and the
    channels-last copy."""
    import tilepy_verify

    xs, ws, ys, s, p, d, g, split = case
    geo = conv_tma.geometry(xs, ws, ys, s, p, d, g)
    name, cx, _ = conv_tma.copy_call(geo, split)
    for kernel, params in ((conv_tma.conv_tma, dict(target="sm_90a", **conv_tma.kernel_params(geo, ws[0] // g, split))),
                           (getattr(conv_tma, name), cx)):
        report = tilepy_verify.verify(kernel, **params)
        errors = [str(f) for f in report.findings if getattr(f, "severity", "error") == "error"]
        assert report.ok and not errors, errors


STAGED_CASES = [CASES[0], CASES[2], CASES[3], CASES[6], CASES[7], CASES[9]]


@pytest.mark.parametrize("staged", [0, 1])
@pytest.mark.parametrize("case", STAGED_CASES, ids=_ids)
def test_conv_tma_staged_epilogue_stores_every_element_once(case, staged):
    """STAGED=1 (the accumulator through shared memory, stored along pixels EC channels at a time) and STAGED=0
    (stored from the registers) write the same convolution: rows past an output row's end (OW 70 in 64-pixel
    segments, 5 pixels in 64), channels past Cout / G (8 of a 32-wide tile; 160 in two tiles of 128), groups,
    a 3-D W stride; every element written (NaN-poisoned output), none past the tensor (NaN-filled copy)."""
    xs, ws, stride, padding, dilation, groups, cx = case
    rng = np.random.default_rng(sum(xs) + sum(ws))
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    ref = conv_igemm.reference(x, w, stride, padding, dilation, groups)
    y = np.full(ref.shape, np.nan, np.float32)
    conv_tma.launch(x, w, y, stride, padding, dilation, groups, split=True, STAGED=staged, **cx)
    assert not np.isnan(y).any(), "some output element was never written"
    assert np.abs(y - ref).max() <= 1e-5 * np.abs(ref).max()


def test_conv_tma_policy_stages_the_epilogue_where_the_ring_keeps_three_stages():
    """The staged tile (BN x (BM + 4) f32) shares the 200 KiB with the ring: it is used where at least three
    stages are left beside it, and those stages are what the ring gets; 3xTF32 at BM 128 (64 KiB a stage) keeps
    the registers' store and the deeper ring. Shared memory stays within the H100's 227 KiB."""
    for xs, ws, split, want in [((16, 256, 56, 56), (256, 256, 1, 1), False, (1, 4)),
                                ((16, 256, 56, 56), (256, 256, 1, 1), True, (0, 3)),
                                ((16, 256, 28, 28), (512, 256, 3, 3), True, (1, 3)),   # BM 64
                                ((16, 64, 28, 28), (64, 64, 3, 3), True, (1, 5)),
                                ((16, 64, 28, 28), (64, 64, 3, 3), False, (1, 6))]:
        geo = conv_tma.geometry(xs, ws, xs[:1] + ws[:1] + xs[2:], 1, ws[2] // 2, 1, 1)
        params = conv_tma.kernel_params(geo, ws[0], split)
        assert (params["STAGED"], params["STAGES"]) == want, (xs, ws, split, params)
        kir = conv_tma.conv_tma.ir("sm_90a", **params)
        assert kir.shared_bytes <= 227 * 1024
    # the preset (what `python -m tilepy_hip emit` builds): 3xTF32 at 3 stages, stored from the registers
    assert conv_tma.conv_tma.ir("sm_90a", **conv_tma.PRESETS["sm_90a"]).shared_bytes <= 227 * 1024


def test_conv_tma_verifier_sees_the_staged_tile_read_before_every_consumer_wrote_it():
    """The consumers meet on the `staged` mbarrier between writing c_s and reading it back in the other
    layout: without the wait the verifier reports the race on c_s (a seeded bug)."""
    import importlib.util
    import pathlib
    import tempfile

    import tilepy_verify

    src = pathlib.Path(conv_tma.__file__).read_text()
    wait = "            tp.mbarrier_wait(staged, 0)"
    assert src.count(wait) == 1
    with tempfile.TemporaryDirectory() as d:
        p = pathlib.Path(d) / "conv_tma_nowait.py"
        p.write_text(src.replace(wait, "            pass"))
        spec = importlib.util.spec_from_file_location("conv_tma_nowait", p)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        geo = conv_tma.geometry((16, 256, 56, 56), (256, 256, 1, 1), (16, 256, 56, 56), 1, 0, 1, 1)
        params = conv_tma.kernel_params(geo, 256, False)
        assert params["STAGED"] == 1
        assert tilepy_verify.verify(conv_tma.conv_tma, target="sm_90a", **params).ok
        report = tilepy_verify.verify(mod.conv_tma, target="sm_90a", **params)
        assert not report.ok and any("race" in str(f) and "c_s" in str(f) for f in report.findings)
