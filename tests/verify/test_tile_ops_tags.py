"""Tags through permute, reshape and scans: a permuted or reshaped element carries the tag of the element it
came from; a scan element stands for the elements along its axis. Each verdict is also what the elements
really are on the interpreter (checked with numpy on the same index maps)."""

import numpy as np

import tilepy as tp
import tilepy_verify


@tp.kernel(threads=64)
def moved(X: tp.Tensor[tp.f32, 16, 32], Y: tp.Tensor[tp.f32, 32, 16], Z: tp.Tensor[tp.f32, 8, 64],
          W: tp.Tensor[tp.f32, 16, 32], BAD: tp.constexpr = 0):
    tp.tag(X, lambda i, j: ("x", i, j))
    x = tp.load(X[0:16, 0:32])
    t = x.T
    tp.assert_tag(t, lambda a: a[1] < 16 + BAD * -8, message="rows of x")
    r = tp.reshape(x, (8, 64))
    tp.assert_tag(r, lambda a: a[1] < 16 and a[2] < 32 - BAD, message="inside x")
    s = tp.cumsum(x, axis=1)
    tp.assert_tag(s, lambda a: a[2] < 32 - 31 * BAD, message="a column of x")
    tp.store(Y[0:32, 0:16], t)
    tp.store(Z[0:8, 0:64], r)
    tp.store(W[0:16, 0:32], s)


def test_tags_follow_the_index_maps():
    assert tilepy_verify.verify(moved).ok
    msgs = sorted(f.message for f in tilepy_verify.verify(moved, BAD=1).errors)
    assert len(msgs) == 3
    transposed = next(m for m in msgs if "a[1] < 16 + BAD" in m or "16 + BAD" in m)
    # the element the counterexample names really comes from a row >= 8 of x
    assert "('x', " in transposed
    x = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    y, z, w = np.zeros((32, 16), np.float32), np.zeros((8, 64), np.float32), np.zeros((16, 32), np.float32)
    moved[(1,)](x, y, z, w)
    assert np.array_equal(y, x.T) and np.array_equal(z, x.reshape(8, 64))
