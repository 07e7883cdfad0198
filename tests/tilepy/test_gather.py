"""Gather loads, scatter stores, strided windows and atomics on the interpreter, against numpy; their errors."""

import numpy as np
import pytest

import tilepy as tp

RNG = np.random.default_rng(7)


@tp.kernel(threads=64)
def embedding(W: tp.Tensor[tp.f32, "V", "D"], I: tp.Tensor[tp.i64, "N"], Y: tp.Tensor[tp.f32, "N", "D"],
              BN: tp.constexpr = 16, BD: tp.constexpr = 32):
    n0 = tp.block_id(0) * BN
    rows = n0 + tp.arange(BN)
    ids = tp.load(I[n0:n0 + BN])
    cols = tp.arange(BD)
    x = tp.load(W[ids[:, None], cols[None, :]], other=-1.0)
    tp.store(Y[rows[:, None], cols[None, :]], x)


def test_embedding_gather_masks_out_of_range_indices_per_dimension():
    V, D, N = 40, 20, 37
    w = RNG.standard_normal((V, D)).astype(np.float32)
    ids = RNG.integers(-3, V + 3, N)
    y = np.full((N, D), np.nan, np.float32)
    embedding[(tp.cdiv(N, 16),)](w, ids, y)
    ok = (ids >= 0) & (ids < V)
    ref = np.where(ok[:, None], w[np.clip(ids, 0, V - 1)], -1.0)
    assert np.array_equal(y, ref)  # columns 20..31 fall outside D: skipped by the scatter, never written


@tp.kernel(threads=64)
def scatter_rows(X: tp.Tensor[tp.f32, "N", 8], P: tp.Tensor[tp.i32, "N"], Y: tp.Tensor[tp.f32, "N", 8],
                 BN: tp.constexpr = 32):
    n0 = tp.block_id(0) * BN
    dest = tp.load(P[n0:n0 + BN], other=-1)
    x = tp.load(X[n0:n0 + BN, 0:8])
    c = tp.arange(8)
    keep = (dest % 3 != 0)[:, None] & (c[None, :] < 8)
    tp.store(Y[dest[:, None], c[None, :]], x * 2.0, mask=keep)


def test_scatter_store_writes_permuted_rows_where_the_mask_holds():
    N = 70
    x = RNG.standard_normal((N, 8)).astype(np.float32)
    perm = RNG.permutation(N).astype(np.int32)
    y = np.zeros((N, 8), np.float32)
    scatter_rows[(tp.cdiv(N, 32),)](x, perm, y)
    ref = np.zeros_like(y)
    keep = perm % 3 != 0
    ref[perm[keep]] = 2 * x[keep]
    assert np.array_equal(y, ref)


@tp.kernel(threads=64)
def strided(X: tp.Tensor[tp.f32, "H", "W"], Y: tp.Tensor[tp.f32, "M", 8, 8], S: tp.constexpr = 2,
            DIL: tp.constexpr = 3):
    b = tp.block_id(0)
    a = tp.load(X[b:b + 8 * S:S, b + 7 * DIL:b - DIL:-DIL])     # every S-th row; columns flipped, dilated
    tp.store(Y[b, 0:8, 0:8], a)


def test_strided_dilated_and_flipped_windows_mask_at_the_edges():
    x = RNG.standard_normal((20, 30)).astype(np.float32)
    y = np.full((4, 8, 8), np.nan, np.float32)
    strided[(4,)](x, y)
    for b in range(4):
        rows = b + 2 * np.arange(8)
        cols = b + 21 - 3 * np.arange(8)
        ok = (rows[:, None] < 20) & (cols[None, :] >= 0) & (cols[None, :] < 30)
        ref = np.where(ok, x[np.minimum(rows, 19)[:, None], np.clip(cols, 0, 29)[None, :]], 0.0)
        assert np.array_equal(y[b], ref)


@tp.kernel(threads=64)
def window5d(X: tp.Tensor[tp.f32, 2, 3, 4, 5, 6], Y: tp.Tensor[tp.f32, 2, 2, 4, 2, 4]):
    a = tp.load(X[0:2, 2:0:-1, 0:4, 0:5:3, 5:-3:-2])
    tp.store(Y[0:2, 0:2, 0:4, 0:2, 0:4], a)


def test_five_d_strided_window():
    x = RNG.standard_normal((2, 3, 4, 5, 6)).astype(np.float32)
    y = np.zeros((2, 2, 4, 2, 4), np.float32)
    window5d[(1,)](x, y)
    ref = np.zeros_like(y)
    ref[:, :, :, :, :3] = x[:, 2:0:-1, :, 0:5:3, 5::-2]   # indices 5, 3, 1, -1: the last is masked
    assert np.array_equal(y, ref)


@tp.kernel(threads=64)
def int_tiles(X: tp.Tensor[tp.i32, 64], Y: tp.Tensor[tp.i64, 64], Z: tp.Tensor[tp.f32, 64]):
    x = tp.load(X[0:64])
    q = (x // 7 + x % 5 * 3).to(tp.i64) * 1000000007
    tp.store(Y[0:64], q)
    tp.store(Z[0:64], (x.to(tp.f32) * 0.5).to(tp.i32).to(tp.f32))


def test_integer_tiles_are_values_python_floor_semantics():
    x = np.arange(-32, 32, dtype=np.int32)
    y, z = np.zeros(64, np.int64), np.zeros(64, np.float32)
    int_tiles[(1,)](x, y, z)
    assert np.array_equal(y, (x // 7 + x % 5 * 3).astype(np.int64) * 1000000007)
    assert np.array_equal(z, np.trunc(x * 0.5).astype(np.float32))


# ------------------------------------------------------------------------------------------- atomics


@tp.kernel(threads=64)
def scatter_add(X: tp.Tensor[tp.f32, "N"], I: tp.Tensor[tp.i32, "N"], Y: tp.Tensor[tp.f32, "M"],
                BLOCK: tp.constexpr = 64):
    i0 = tp.block_id(0) * BLOCK
    idx = tp.load(I[i0:i0 + BLOCK], other=-1)
    tp.atomic_add(Y[idx], tp.load(X[i0:i0 + BLOCK]))


def test_atomic_add_combines_duplicate_indices():
    x = RNG.standard_normal(300).astype(np.float32)
    idx = RNG.integers(0, 10, 300).astype(np.int32)
    y = np.zeros(10, np.float32)
    scatter_add[(5,)](x, idx, y)
    ref = np.zeros(10, np.float64)
    np.add.at(ref, idx, x.astype(np.float64))
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


@tp.kernel(threads=64)
def minmax(X: tp.Tensor[tp.i32, "N"], I: tp.Tensor[tp.i32, "N"], HI: tp.Tensor[tp.i32, 8],
           LO: tp.Tensor[tp.f32, 8], OLD: tp.Tensor[tp.i32, "N"]):
    i0 = tp.block_id(0) * 64
    idx = tp.load(I[i0:i0 + 64], other=-1)
    x = tp.load(X[i0:i0 + 64])
    old = tp.atomic_max(HI[idx], x, mask=x > -50)
    tp.atomic_min(LO[idx], x.to(tp.f32), sem="acq_rel")
    tp.store(OLD[i0:i0 + 64], old)


def test_atomic_max_min_with_mask_and_old_values():
    x = RNG.integers(-100, 100, 128).astype(np.int32)
    idx = RNG.integers(0, 8, 128).astype(np.int32)
    hi, lo, old = np.full(8, -1000, np.int32), np.full(8, 1000, np.float32), np.zeros(128, np.int32)
    minmax[(2,)](x, idx, hi, lo, old)
    for k in range(8):
        sel = idx == k
        assert hi[k] == max([-1000, *x[sel & (x > -50)]])
        assert lo[k] == min([1000, *x[sel]])
    # each old value is the maximum of what came before it at its element (slot order on the interpreter)
    run = np.full(8, -1000)
    for i in range(128):
        if x[i] > -50:
            assert old[i] == run[idx[i]]
            run[idx[i]] = max(run[idx[i]], x[i])
        else:
            assert old[i] == 0


@tp.kernel(threads=64)
def claim(L: tp.Tensor[tp.i32, 4], OWNER: tp.Tensor[tp.i32, "B", 4]):
    b = tp.block_id(0)
    slot = tp.arange(4)
    old = tp.atomic_cas(L[slot], 0, b + 1)       # the first block to come claims every slot
    tp.store(OWNER[b, 0:4], old)


def test_atomic_cas_returns_old_values_and_swaps_only_on_equality():
    lock, owner = np.zeros(4, np.int32), np.full((3, 4), -1, np.int32)
    claim[(3,)](lock, owner)
    assert np.array_equal(lock, [1, 1, 1, 1])
    assert np.array_equal(owner, [[0] * 4, [1] * 4, [1] * 4])


def test_bf16_atomic_add_rounds_after_every_update():
    torch = pytest.importorskip("torch")

    @tp.kernel(threads=64)
    def bf16_add(X: tp.Tensor[tp.bf16, 64], Y: tp.Tensor[tp.bf16, 1]):
        tp.atomic_add(Y[tp.arange(64) * 0], tp.load(X[0:64]))

    x = torch.full((64,), 1.0, dtype=torch.bfloat16)
    y = torch.full((1,), 256.0, dtype=torch.bfloat16)
    bf16_add[(1,)](x, y)
    assert y.item() == 256.0  # 256 + 1 rounds back to 256 in bf16, 64 times


# ------------------------------------------------------------------------------------------- errors


def _compile_error(src_fn, cls, text):
    with pytest.raises(cls) as e:
        src_fn.ir()
    assert text in str(e.value)
    return e.value


def test_gather_errors():
    @tp.kernel(threads=64)
    def mixed(X: tp.Tensor[tp.f32, "M", "N"], Y: tp.Tensor[tp.f32, 64]):
        tp.store(Y[0:64], tp.load(X[tp.arange(64), 0:1]))

    @tp.kernel(threads=64)
    def floaty(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, 64]):
        tp.store(Y[0:64], tp.load(X[tp.arange(64).to(tp.f32)]))

    @tp.kernel(threads=64)
    def partial(X: tp.Tensor[tp.f32, "M", "N"], Y: tp.Tensor[tp.f32, 64]):
        tp.store(Y[0:64], tp.load(X[tp.arange(64)]))

    @tp.kernel(threads=64)
    def shapes(X: tp.Tensor[tp.f32, "M", "N"], Y: tp.Tensor[tp.f32, 64]):
        tp.store(Y[0:64], tp.load(X[tp.arange(64), tp.arange(32)]))

    @tp.kernel(threads=64, target="sm_80")
    def copied(X: tp.Tensor[tp.f32, "N"]):
        s = tp.shared((64,), tp.f32)
        tp.copy(X[0:128:2], s)

    @tp.kernel(threads=64)
    def bad_atomic(X: tp.Tensor[tp.f64, "N"]):
        tp.atomic_add(X[tp.arange(64)], 1.0)

    @tp.kernel(threads=64)
    def bad_sem(X: tp.Tensor[tp.f32, "N"]):
        tp.atomic_add(X[tp.arange(64)], 1.0, sem="seq_cst")

    @tp.kernel(threads=64)
    def runtime_step(X: tp.Tensor[tp.f32, "N"], s: tp.i32):
        tp.load(X[0:64 * s:s])

    e = _compile_error(mixed, tp.UnsupportedConstructError, "cannot also be sliced")
    assert "tp.arange" in e.hint
    _compile_error(floaty, tp.KernelTypeError, "gathers take integer tiles")
    _compile_error(partial, tp.ShapeError, "a gather indexes every dimension")
    _compile_error(shapes, tp.ShapeError, "do not broadcast")
    _compile_error(copied, tp.UnsupportedConstructError, "copies move rectangular windows")
    _compile_error(bad_atomic, tp.KernelTypeError, "f32, bf16 or i32")
    _compile_error(bad_sem, tp.KernelTypeError, "sem must be one of")
    _compile_error(runtime_step, tp.ConstexprError, "step of the slice")


def test_atomic_statement_is_kept_in_the_ir():
    from tilepy import ir

    ops = [s.call.op for s in ir.walk(scatter_add.ir().body) if isinstance(s, ir.Eval)]
    assert ops == ["atomic_add"]


@tp.kernel(threads=64)
def mixed_ranks(X: tp.Tensor[tp.f32, "M", "N"], Y: tp.Tensor[tp.f32, 8, 16]):
    rows = tp.arange(8)[:, None] * 2                 # (8, 1)
    cols = tp.arange(16)                            # (16,): numpy gives it a leading size-1 axis
    tp.store(Y[0:8, 0:16], tp.load(X[rows, cols]))


def test_index_tiles_of_lower_rank_broadcast_like_numpy():
    x = RNG.standard_normal((16, 16)).astype(np.float32)
    y = np.zeros((8, 16), np.float32)
    mixed_ranks[(1,)](x, y)
    assert np.array_equal(y, x[(np.arange(8)[:, None] * 2), np.arange(16)])
