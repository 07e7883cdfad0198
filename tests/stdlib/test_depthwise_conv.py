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
    dw.launch(x, w, y, s, pad, d)
    ref = dw.reference(x, w, s, pad, d)
    assert y.shape == ref.shape
    # an fp32 sum of KH * KW products: a few fp32 roundings of the sum of magnitudes
    bound = 4 * np.finfo(np.float32).eps * k[0] * k[1] * np.abs(x).max() * np.abs(w).max()
    assert np.abs(y - ref).max() <= bound, np.abs(y - ref).max()


def test_depthwise_verifies_clean():
    report = tv.verify(dw.depthwise_conv2d, target="sm_90a", KH=7, KW=7, S=1, PH=3, PW=3, D=1, BH=8, BW=64)
    assert report.ok and not report.errors, str(report)
