"""Shared by the bf16 GEMM interpreter tests: gemm_hopper.launch with given constexprs, twice through one plan
(NaN-poisoned output each time), against float64 of the bf16-rounded operands."""

from __future__ import annotations

import numpy as np

import tilepy as tp
from stdlib_kernels import gemm_hopper
from tilepy.dtypes import round_bf16


def check_launch_twice(m: int, n: int, k: int, out, params: dict) -> None:
    """bf16 out: within one bf16 rounding of the f32 sum (2^-8 of the largest |ref|) and exactly bf16 values;
    f32 out: rtol 1e-5, atol 1e-4 of the largest |ref| (bf16 products summed in f32)."""
    rng = np.random.default_rng(m + n + k)
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = round_bf16(rng.standard_normal((k, n)).astype(np.float32))
    ref = gemm_hopper.reference(a, b)
    for _ in range(2):
        c = np.full((m, n), np.nan, np.float32)
        gemm_hopper.launch(a, b, c, out_dtype=out, **params)
        assert not np.isnan(c).any()
        if out == tp.bf16:
            assert np.abs(c - ref).max() <= 2.0**-8 * np.abs(ref).max()
            np.testing.assert_array_equal(c, round_bf16(c))
        else:
            np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4 * np.abs(ref).max())
