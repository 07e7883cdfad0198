"""Property test: random elementwise/reduction programs written as tilepy source, compiled by the front end
and run by the interpreter, agree with the same expression evaluated by numpy in float64."""

import importlib.util
import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

_counter = itertools.count()

LEAVES = st.sampled_from(["x", "y", "1.5", "0.25"])


def _expr(depth):
    if depth == 0:
        return LEAVES
    sub = _expr(depth - 1)
    return st.one_of(
        LEAVES,
        st.tuples(st.sampled_from(["+", "-", "*"]), sub, sub).map(lambda t: f"({t[1]} {t[0]} {t[2]})"),
        st.tuples(st.sampled_from(["maximum", "minimum"]), sub, sub).map(lambda t: f"tp.{t[0]}({t[1]}, {t[2]})"),
        sub.map(lambda e: f"tp.tanh({e})"),
        st.tuples(sub, sub, sub).map(lambda t: f"tp.where({t[0]} > 0.0, {t[1]}, {t[2]})"),
    )


NUMPY = {"tp.maximum": "np.maximum", "tp.minimum": "np.minimum", "tp.tanh": "np.tanh", "tp.where": "np.where"}


def _numpy_expr(e: str) -> str:
    for a, b in NUMPY.items():
        e = e.replace(a, b)
    return e


def _load_module(tmp_path, source: str):
    path = tmp_path / f"generated_{next(_counter)}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@settings(max_examples=25, deadline=None)
@given(expr=_expr(3), rows=st.integers(1, 9), cols=st.integers(1, 70), reduce=st.sampled_from([None, 0, 1]),
       seed=st.integers(0, 2**31))
def test_generated_programs_match_numpy(tmp_path_factory, expr, rows, cols, reduce, seed):
    tail = {None: "z",
            0: "tp.sum(z, axis=0, keepdims=True) + z * 0.0",
            1: "tp.max(tp.where(keep, z, -1e30), axis=1, keepdims=True) + z * 0.0"}[reduce]
    source = f'''
import tilepy as tp

@tp.kernel(threads=64)
def k(X: tp.Tensor[tp.f32, "M", "N"], Y: tp.Tensor[tp.f32, "M", "N"], Z: tp.Tensor[tp.f32, "M", "N"],
      BM: tp.constexpr = 16, BN: tp.constexpr = 128):
    m0 = tp.block_id(0) * BM
    keep = ((tp.arange(BM)[:, None] + m0) < Z.shape[0]) & (tp.arange(BN)[None, :] < Z.shape[1])
    x = tp.load(X[m0:m0 + BM, 0:BN])
    y = tp.load(Y[m0:m0 + BM, 0:BN])
    z = tp.where(keep, {expr}, 0.0) + x * 0.0
    tp.store(Z[m0:m0 + BM, 0:BN], {tail})
'''
    mod = _load_module(tmp_path_factory.mktemp("gen"), source)
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal((rows, cols), dtype=np.float32), rng.standard_normal((rows, cols), dtype=np.float32)
    z = np.full_like(x, np.nan)
    mod.k[((rows + 15) // 16,)](x, y, z)
    xd, yd = x.astype(np.float64), y.astype(np.float64)
    ref = eval(_numpy_expr(expr), {"np": np, "x": xd, "y": yd}) * np.ones_like(xd)  # noqa: S307 - test-built
    if reduce == 0:
        # blocks of 16 rows: each block sums its own rows only
        ref = np.concatenate([ref[i:i + 16].sum(axis=0, keepdims=True).repeat(len(ref[i:i + 16]), 0)
                              for i in range(0, rows, 16)])
    elif reduce == 1:
        ref = ref.max(axis=1, keepdims=True).repeat(cols, 1)
    np.testing.assert_allclose(z, ref, rtol=2e-5, atol=2e-5)
