"""Kernel.retyped: one kernel source, several signatures (an output dtype as a choice)."""

import numpy as np
import pytest

import tilepy as tp
from tilepy.dtypes import round_bf16


@tp.kernel(threads=64)
def scale(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], alpha: tp.f32, BLOCK: tp.constexpr = 64):
    i0 = tp.block_id(0) * BLOCK
    tp.store(Y[i0:i0 + BLOCK], tp.load(X[i0:i0 + BLOCK]) * alpha)


def test_retyped_output_rounds_on_store():
    to_bf16 = scale.retyped(Y=tp.Tensor[tp.bf16, "N"])
    x = np.random.default_rng(0).standard_normal(100).astype(np.float32)
    y = np.full_like(x, np.nan)
    to_bf16[(2,)](x, y, 3.0)
    np.testing.assert_array_equal(y, round_bf16(x * np.float32(3.0)))
    y32 = np.full_like(x, np.nan)
    scale[(2,)](x, y32, 3.0)                      # the original keeps its f32 output and its own cache
    np.testing.assert_array_equal(y32, x * np.float32(3.0))
    assert to_bf16.ir().params[1].type.dtype == tp.bf16 and scale.ir().params[1].type.dtype == tp.f32


def test_retyped_scalar_parameter():
    k = scale.retyped(alpha=tp.i32)
    assert k.ir().params[2].type.dtype == tp.i32


@pytest.mark.parametrize("kw", [dict(BLOCK=tp.Tensor[tp.f32, "N"]), dict(Z=tp.Tensor[tp.f32, "N"]),
                                dict(X=tp.f32), dict(alpha=tp.Tensor[tp.f32, "N"])])
def test_retyped_refuses_what_is_not_a_retyping(kw):
    with pytest.raises(tp.CompileError, match="cannot retype"):
        scale.retyped(**kw)
