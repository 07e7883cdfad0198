"""prod/any/all/argmax/argmin, cumsum/cumprod (reverse, exclusive), permute/.T, reshape and broadcast_to of
register tiles on the interpreter, against numpy in float64; their errors."""

import numpy as np
import pytest

import tilepy as tp


@tp.kernel(threads=64)
def reductions(X: tp.Tensor[tp.f32, 16, 32], P: tp.Tensor[tp.f32, 16], IDX: tp.Tensor[tp.i32, 2, 32],
               FLAGS: tp.Tensor[tp.bool_, 2, 16]):
    x = tp.load(X[0:16, 0:32])
    tp.store(P[0:16], tp.prod(x, axis=1))
    tp.store(IDX[0, 0:32], tp.argmax(x, axis=0))
    tp.store(IDX[1, 0:32], tp.argmin(x, axis=-2))
    tp.store(FLAGS[0, 0:16], tp.any(x > 1.5, axis=1))
    tp.store(FLAGS[1, 0:16], tp.all(x > -1.5, axis=1))


def test_reductions_match_numpy_first_index_on_ties_nan_is_the_extreme():
    x = np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32)
    x[2, 4] = x[9, 4] = 5.0        # a tie for the max of column 4: the first index wins
    x[7, 6] = np.nan               # torch: NaN is both the max and the min
    p, idx, flags = np.zeros(16, np.float32), np.zeros((2, 32), np.int32), np.zeros((2, 16), bool)
    reductions[(1,)](x, p, idx, flags)
    np.testing.assert_allclose(p, np.prod(x.astype(np.float64), axis=1), rtol=1e-5)
    torch = pytest.importorskip("torch")
    assert np.array_equal(idx[0], torch.argmax(torch.from_numpy(x), dim=0).numpy())
    assert np.array_equal(idx[1], torch.argmin(torch.from_numpy(x), dim=0).numpy())
    assert idx[0, 4] == 2 and idx[0, 6] == 7 and idx[1, 6] == 7
    assert np.array_equal(flags[0], (x > 1.5).any(1)) and np.array_equal(flags[1], (x > -1.5).all(1))


@tp.kernel(threads=64)
def scans(X: tp.Tensor[tp.f32, 16, 32], C: tp.Tensor[tp.f32, 4, 16, 32], B: tp.Tensor[tp.i32, 16, 32]):
    x = tp.load(X[0:16, 0:32])
    tp.store(C[0, 0:16, 0:32], tp.cumsum(x, axis=1))
    tp.store(C[1, 0:16, 0:32], tp.cumsum(x, axis=0, reverse=True))
    tp.store(C[2, 0:16, 0:32], tp.cumprod(x, axis=1, exclusive=True))
    tp.store(C[3, 0:16, 0:32], tp.cumsum(x, axis=1, reverse=True, exclusive=True))
    tp.store(B[0:16, 0:32], tp.cumsum(x > 0, axis=1))       # a bool scan counts (in i32)


def test_scans_match_numpy():
    x = np.random.default_rng(1).standard_normal((16, 32)).astype(np.float32)
    c, b = np.zeros((4, 16, 32), np.float32), np.zeros((16, 32), np.int32)
    scans[(1,)](x, c, b)
    xd = x.astype(np.float64)
    np.testing.assert_allclose(c[0], np.cumsum(xd, 1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(c[1], np.cumsum(xd[::-1], 0)[::-1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(c[2], np.concatenate([np.ones((16, 1)), np.cumprod(xd, 1)[:, :-1]], 1), rtol=1e-4,
                               atol=1e-6)
    np.testing.assert_allclose(c[3], np.cumsum(xd[:, ::-1], 1)[:, ::-1] - xd, rtol=1e-4, atol=1e-5)
    assert np.array_equal(b, np.cumsum(x > 0, 1))


@tp.kernel(threads=64)
def shapes(X: tp.Tensor[tp.f32, 4, 8, 16], T: tp.Tensor[tp.f32, 16, 4, 8], R: tp.Tensor[tp.f32, 32, 16],
           B: tp.Tensor[tp.f32, 4, 8, 16], U: tp.Tensor[tp.f32, 128, 4]):
    x = tp.load(X[0:4, 0:8, 0:16])
    tp.store(T[0:16, 0:4, 0:8], tp.permute(x, (2, 0, 1)))
    tp.store(R[0:32, 0:16], tp.reshape(x, (32, 16)))
    tp.store(B[0:4, 0:8, 0:16], tp.broadcast_to(tp.max(x, axis=1, keepdims=True), (4, 8, 16)))
    tp.store(U[0:128, 0:4], tp.reshape(x, (4, 128)).T)


def test_permute_reshape_broadcast_match_numpy():
    x = np.random.default_rng(2).standard_normal((4, 8, 16)).astype(np.float32)
    t, r, b, u = (np.zeros(s, np.float32) for s in ((16, 4, 8), (32, 16), (4, 8, 16), (128, 4)))
    shapes[(1,)](x, t, r, b, u)
    assert np.array_equal(t, x.transpose(2, 0, 1)) and np.array_equal(r, x.reshape(32, 16))
    assert np.array_equal(b, np.broadcast_to(x.max(1, keepdims=True), x.shape))
    assert np.array_equal(u, x.reshape(4, 128).T)


def test_permute_is_a_layout_change():
    from tilepy import ir

    (s,) = [s for s in ir.walk(shapes.ir().body) if isinstance(s, ir.Eval) and s.call.args[0].type.shape == (16, 4, 8)]
    perm = s.call.args[1]
    assert perm.op == "permute" and perm.type.layout.strides == tuple(perm.args[0].type.layout.strides[d]
                                                                      for d in (2, 0, 1))


def test_errors():
    def fails(src_kernel, cls, text):
        with pytest.raises(cls, match=text):
            src_kernel.ir()

    @tp.kernel(threads=64)
    def bad_axis(X: tp.Tensor[tp.f32, 64]):
        tp.store(X[0:64], tp.cumsum(tp.load(X[0:64]), axis=1))

    @tp.kernel(threads=64)
    def no_axis(X: tp.Tensor[tp.f32, 64]):
        tp.store(X[0:1], tp.prod(tp.load(X[0:64])))

    @tp.kernel(threads=64)
    def bad_perm(X: tp.Tensor[tp.f32, 8, 8]):
        tp.store(X[0:8, 0:8], tp.permute(tp.load(X[0:8, 0:8]), (0, 0)))

    @tp.kernel(threads=64)
    def bad_reshape(X: tp.Tensor[tp.f32, 8, 8]):
        tp.store(X[0:8, 0:8], tp.reshape(tp.load(X[0:8, 0:8]), (8, 4)))

    @tp.kernel(threads=64)
    def bad_broadcast(X: tp.Tensor[tp.f32, 8, 8]):
        tp.store(X[0:8, 0:8], tp.broadcast_to(tp.load(X[0:8, 0:8]), (16, 8)))

    fails(bad_axis, tp.ShapeError, "axis 1 is out of range")
    fails(no_axis, tp.KernelTypeError, "needs an axis")
    fails(bad_perm, tp.ShapeError, "permutation")
    fails(bad_reshape, tp.ShapeError, "cannot reshape")
    fails(bad_broadcast, tp.ShapeError, "does not broadcast")
