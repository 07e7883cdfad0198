"""G38's prototype (benchmarks/profile/g38_bkn.py): gemm_fp32 with a "kn" B read as it is and split by the consumers in
shared memory, one launch. On the interpreter: bit for bit gemm_fp32.launch's product (split pass + A_RAW GEMM) at
ragged M / N / K (one k-tile too), both tile widths, 2-4 stages, a batch sharing one B, the halves made in line or a
tile ahead (AHEAD); within 2^-22 of float64;
bad shapes refused."""

import os
import sys

import numpy as np
import pytest

import tilepy as tp
from stdlib_kernels import gemm_fp32

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "profile"))

import g38_bkn  # noqa: E402


@pytest.mark.parametrize("ahead", [0, 1])
@pytest.mark.parametrize("m,n,k,bn,stages,batch", [(130, 200, 72, 128, 4, 1), (100, 68, 40, 64, 4, 1),
                                                   (64, 128, 260, 64, 3, 1), (70, 132, 100, 128, 2, 2),
                                                   (64, 64, 20, 64, 4, 1)])
def test_bkn_is_launch_bit_for_bit(m, n, k, bn, stages, batch, ahead):
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((batch, m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.full((batch, m, n), np.nan, np.float32)
    c0 = c.copy()
    g38_bkn.launch_bkn(a, b, c, **{**g38_bkn.params(bn), "STAGES": stages, "AHEAD": ahead})
    instr = {64: tp.nv.wgmma_m64n64k8_tf32, 128: tp.nv.wgmma_m64n128k8_tf32}[bn]
    gemm_fp32.launch(a, b, c0, "kn", BN=bn, INSTR=instr, STAGES=stages, SWAP=0)
    np.testing.assert_array_equal(c, c0)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert float(np.linalg.norm(c - ref) / np.linalg.norm(ref)) < 2.0**-22


def test_bkn_refuses_rows_tma_cannot_read():
    a = np.zeros((8, 16), np.float32)
    with pytest.raises(ValueError, match="multiples of 4"):
        g38_bkn.launch_bkn(a, np.zeros((16, 10), np.float32), np.zeros((8, 10), np.float32))
