"""Row softmax: one row per block, the whole row in one register tile (masked past the row's end)."""

import numpy as np

import tilepy as tp


@tp.kernel(threads=128)
def softmax(X: tp.Tensor[tp.f32, "M", "N"], Y: tp.Tensor[tp.f32, "M", "N"], BLOCK_N: tp.constexpr = 1024):
    row = tp.block_id(0)
    cols = tp.arange(BLOCK_N)
    valid = cols < X.shape[1]
    x = tp.load(X[row, 0:BLOCK_N], mask=valid, other=float("-inf"))
    x_max = tp.max(x, axis=0, keepdims=True)
    e = tp.exp(x - x_max)
    denom = tp.sum(e, axis=0, keepdims=True)
    tp.store(Y[row, 0:BLOCK_N], e / denom)


def launch(x, y, **kw):
    block = max(16, 1 << (int(x.shape[1]) - 1).bit_length())
    return softmax[(x.shape[0],)](x, y, BLOCK_N=block, **kw)


def reference(x):
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


if __name__ == "__main__":
    x = np.random.default_rng(0).standard_normal((37, 1000), dtype=np.float32)
    y = np.empty_like(x)
    launch(x, y)
    print("max |err| =", float(np.abs(y - reference(x)).max()))
