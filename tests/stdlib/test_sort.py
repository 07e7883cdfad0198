"""stdlib_kernels/sort.py on the interpreter against torch.sort(stable=True): values bit for bit (-0.0 and NaN
payloads included), indices exactly, ascending and descending, float32 and int32, every row length class
(several rows a block, one block a row, padding), and the PICK form (one position of each sorted row)."""

import numpy as np
import pytest
import torch

import tilepy_verify
from stdlib_kernels import sort as S


def _run(x, descending=False, pick=-1):
    r = x.shape[0]
    cols = x.shape[1] if pick < 0 else 1
    v, i = np.empty((r, cols), x.dtype), np.full((r, cols), -7, np.int64)
    S.launch(x, v, i, descending=descending, pick=pick)
    return v, i


def _torch(x, descending):
    tv, ti = torch.sort(torch.from_numpy(x), dim=1, stable=True, descending=descending)
    return tv.numpy(), ti.numpy()


def _special(rng, r, n):
    x = rng.integers(-3, 4, (r, n)).astype(np.float32)          # many ties
    x.flat[::7] = np.nan
    x.flat[1::11] = -0.0
    x.flat[2::13] = np.inf
    x.flat[3::17] = -np.inf
    x.flat[4::19] = -np.nan                                       # a NaN with the sign bit set
    x.flat[5::23] = 1e-45                                         # denormal
    return x


@pytest.mark.parametrize("n,r", [(1, 3), (2, 5), (23, 41), (64, 40), (101, 37), (1000, 3), (8192, 1)])
@pytest.mark.parametrize("descending", [False, True])
def test_float_rows_match_torch(n, r, descending):
    rng = np.random.default_rng(n * 7 + descending)
    x = _special(rng, r, n) if n > 2 else rng.standard_normal((r, n)).astype(np.float32)
    v, i = _run(x, descending)
    tv, ti = _torch(x, descending)
    assert np.array_equal(i, ti)
    assert np.array_equal(v.view(np.int32), tv.view(np.int32))


@pytest.mark.parametrize("descending", [False, True])
def test_int32_rows_match_torch(descending):
    rng = np.random.default_rng(3)
    for x in (rng.integers(-2**31, 2**31 - 1, (5, 300), dtype=np.int64).astype(np.int32),
              rng.integers(-2, 3, (9, 77)).astype(np.int32),
              np.array([[-2**31, 2**31 - 1, 0, -1, -2**31, 2**31 - 1]], np.int32)):
        v, i = _run(x, descending)
        tv, ti = _torch(x, descending)
        assert np.array_equal(i, ti) and np.array_equal(v, tv)


@pytest.mark.parametrize("n", [29, 64, 300])
def test_pick_is_the_sorted_rows_element(n):
    rng = np.random.default_rng(n)
    x = _special(rng, 33, n)
    tv, ti = _torch(x, False)
    for q in (0, (n - 1) // 2, n - 1):
        v, i = _run(x, pick=q)
        assert np.array_equal(i[:, 0], ti[:, q]) and np.array_equal(v[:, 0].view(np.int32), tv[:, q].view(np.int32))


def test_pick_nan_first_is_torch_median():
    rng = np.random.default_rng(5)
    x = rng.integers(-3, 4, (40, 37)).astype(np.float32)
    x[::3, 5] = np.nan
    x[::6, 2] = np.nan
    x[1::4, 7] = -np.nan
    v, i = np.empty((40, 1), np.float32), np.empty((40, 1), np.int64)
    S.launch(x, v, i, pick=18, nan_first=True)
    tv, ti = torch.median(torch.from_numpy(x), dim=1)
    assert np.array_equal(v[:, 0], tv.numpy(), equal_nan=True) and np.array_equal(i[:, 0], ti.numpy())


def test_shape_of_fits_the_rows():
    for n in (1, 2, 3, 8, 9, 100, 128, 129, 4096, 8192):
        L, VB, threads, rb = S.shape_of(n)
        assert 2 ** L >= n and (L == 1 or 2 ** (L - 1) < n)
        assert rb << (L - VB) <= threads <= 1024 and threads % 32 == 0
    with pytest.raises(ValueError, match="at most 8192"):
        S.shape_of(8193)


@pytest.mark.parametrize("n,pick", [(100, -1), (100, 4), (8192, -1), (8192, 0)])
def test_sort_kernel_verifies_clean_and_fast(n, pick):
    L, VB, threads, rb = S.shape_of(n)
    rep = tilepy_verify.verify(S.sort_rows, target="sm_90a", L=L, VB=VB, THREADS=threads, RB=rb, PICK=pick)
    assert rep.ok, str(rep)
