"""stdlib_kernels/depthwise_conv.py on the interpreter against torch's conv2d in float64 (ragged planes, strides,
dilation, unequal padding), and verified clean."""

from __future__ import annotations

import numpy as np
import pytest

import tilepy_verify as tv
from stdlib_kernels import depthwise_conv as dw


@pytest.mark.parametrize("shape,k,s,pad,d", [
    ((2, 3, 19, 23), (7, 7), 1, (3, 3), 1),
    ((1, 5, 30, 17), (7, 5), 2, (3, 1), 1),
    ((2, 2, 21, 26), (3, 9), 1, (2, 4), 2),
    ((1, 4, 9, 70), (5, 5), 3, (0, 2), 1),      # an output row wider than one 64-column tile
])
def test_depthwise_matches_float64(shape, k, s, pad, d):
    rng = np.random.default_rng(sum(shape) + s)
    x = rng.standard_normal(shape, dtype=np.float32)
    w = rng.standard_normal((shape[1], 1, *k), dtype=np.float32)
    oh, ow = (dw.out_size(n, kk, s, p, d) for n, kk, p in zip(shape[2:], k, pad))
    y = np.full((shape[0], shape[1], oh, ow), np.nan, np.float32)
    dw.launch(x, w, y, s, pad, d, staged=False)
    ref = dw.reference(x, w, s, pad, d)
    assert y.shape == ref.shape
    # an fp32 sum of KH * KW products: a few fp32 roundings of the sum of magnitudes
    bound = 4 * np.finfo(np.float32).eps * k[0] * k[1] * np.abs(x).max() * np.abs(w).max()
    assert np.abs(y - ref).max() <= bound, np.abs(y - ref).max()


def test_depthwise_verifies_clean():
    report = tv.verify(dw.depthwise_conv2d, target="sm_90a", KH=7, KW=7, S=1, PH=3, PW=3, D=1, BH=8, BW=64)
    assert report.ok and not report.errors, str(report)


@pytest.mark.parametrize("shape,k,s,pad,d", [
    ((2, 4, 14, 14), (7, 7), 1, (3, 3), 1),     # two planes a block
    ((1, 8, 7, 9), (3, 3), 1, (1, 1), 1),       # eight planes of 7 x 9
    ((2, 6, 19, 23), (3, 3), 2, (1, 1), 1),     # two stride phases a side
    ((1, 3, 9, 9), (5, 5), 1, (4, 4), 2),       # dilation; 3 channels: one plane a block
    ((1, 4, 15, 12), (3, 5), 3, (1, 2), 1),     # stride 3, unequal window
])
def test_staged_depthwise_matches_float64(shape, k, s, pad, d):
    rng = np.random.default_rng(sum(shape) + s + 1)
    x = rng.standard_normal(shape, dtype=np.float32)
    w = rng.standard_normal((shape[1], 1, *k), dtype=np.float32)
    oh, ow = (dw.out_size(n, kk, s, p, d) for n, kk, p in zip(shape[2:], k, pad))
    st = dw.staged_tile(shape[1], oh, ow, k, s, d)
    assert st is not None and shape[1] % st["BP"] == 0
    y = np.full((shape[0], shape[1], oh, ow), np.nan, np.float32)
    dw.launch(x, w, y, s, pad, d, staged=True)
    ref = dw.reference(x, w, s, pad, d)
    bound = 4 * np.finfo(np.float32).eps * k[0] * k[1] * np.abs(x).max() * np.abs(w).max()
    assert np.abs(y - ref).max() <= bound, np.abs(y - ref).max()


def test_staged_tile_fills_the_block_with_planes_that_divide_the_channels():
    assert dw.staged_tile(384, 14, 14, (7, 7), 1, 1) == {"BP": 2, "BH": 16, "BW": 16}
    assert dw.staged_tile(960, 7, 7, (3, 3), 1, 1) == {"BP": 8, "BH": 8, "BW": 8}
    assert dw.staged_tile(3, 7, 7, (3, 3), 1, 1)["BP"] == 1             # 3 channels: no second plane fits
    assert dw.staged_tile(96, 28, 28, (7, 7), 2, 1) == {"BP": 1, "BH": 16, "BW": 32}


@pytest.mark.parametrize("params", [dict(KH=7, KW=7, S=1, PH=3, PW=3, D=1, BP=2, BH=16, BW=16),
                                    dict(KH=3, KW=3, S=2, PH=1, PW=1, D=1, BP=4, BH=8, BW=16)])
def test_staged_depthwise_verifies_clean(params):
    report = tv.verify(dw.depthwise_conv2d_staged, target="sm_90a", **params)
    assert report.ok and not report.errors, str(report)
