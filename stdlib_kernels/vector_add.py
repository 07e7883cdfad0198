"""z = x + y, one 1-D tile per block; the last tile is masked at the tensor's end."""

import numpy as np

import tilepy as tp


@tp.kernel(threads=128)
def vector_add(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "N"], Z: tp.Tensor[tp.f32, "N"],
               BLOCK: tp.constexpr = 1024):
    i0 = tp.block_id(0) * BLOCK
    tp.tag(X, lambda i: ("x", i))
    tp.tag(Y, lambda i: ("y", i))
    x = tp.load(X[i0:i0 + BLOCK])
    y = tp.load(Y[i0:i0 + BLOCK])
    z = x + y
    tp.assert_tag(z, lambda t: t[0][1] == t[1][1])  # each sum pairs x[i] with y[i]
    tp.store(Z[i0:i0 + BLOCK], z)


def launch(x, y, z, BLOCK: int = 1024, **kw):
    return vector_add[(tp.cdiv(x.shape[0], BLOCK),)](x, y, z, BLOCK=BLOCK, **kw)


def reference(x, y):
    return np.asarray(x, np.float64) + np.asarray(y, np.float64)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(5000, dtype=np.float32), rng.standard_normal(5000, dtype=np.float32)
    z = np.empty_like(x)
    launch(x, y, z)
    print("max |err| =", float(np.abs(z - reference(x, y)).max()))
