"""Scatter-add along dim 0 (torch.Tensor.index_add_ / scatter_add_ with a row index): Y[index[i], :] += X[i, :].

Rows of X that share an index add into one row of Y from any block, so the update is an atomic add; the
verifier proves that no other write to Y races with it. Each block adds BN rows, BD columns at a time.
"""

import numpy as np

import tilepy as tp


@tp.kernel(threads=128)
def scatter_add(X: tp.Tensor[tp.f32, "N", "D"], index: tp.Tensor[tp.i64, "N"], Y: tp.Tensor[tp.f32, "M", "D"],
                BN: tp.constexpr = 16, BD: tp.constexpr = 64):
    n0 = tp.block_id(0) * BN
    dest = tp.load(index[n0:n0 + BN], other=-1)                 # rows past N: index -1, outside Y: skipped
    for d0 in range(0, X.shape[1], BD):
        cols = d0 + tp.arange(BD)
        x = tp.load(X[n0:n0 + BN, d0:d0 + BD])
        tp.atomic_add(Y[dest[:, None], cols[None, :]], x)      # relaxed: only the sums matter


def launch(x, index, y, **kw):
    return scatter_add[(tp.cdiv(x.shape[0], 16),)](x, index, y, **kw)


def reference(x, index, y0):
    out = np.array(y0, np.float64)
    np.add.at(out, np.asarray(index), np.asarray(x, np.float64))
    return out


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.standard_normal((500, 70), dtype=np.float32)
    index = rng.integers(0, 40, 500)
    y = np.zeros((40, 70), np.float32)
    launch(x, index, y)
    print("max |err| =", float(np.abs(y - reference(x, index, np.zeros((40, 70)))).max()))
