"""tp.store_bulk (the TMA store: shared -> global, read asynchronously until tp.store_bulk_wait) on the
interpreter and in the verifier: a two-role ring of output tiles where warpgroup 1 writes each tile into one
shared tile c_s and warpgroup 0 stores it with a bulk store. The correct kernel waits for the store's read of
c_s before it lets warpgroup 1 write the next tile; the seeded bug hands c_s back before that wait, so the next
tile's writes race with the store's read. The verifier reports the race; the interpreter (which reads c_s at the
wait, the latest moment the hardware may) shows its effect: a tile stored with the next tile's values."""

import numpy as np
import pytest

import tilepy as tp
import tilepy_verify as tv
from tilepy.errors import InterpreterError


@tp.kernel(threads=256, target="sm_90a")
def tiles_out(A: tp.Tensor[tp.f32, "M", "N"], C: tp.Tensor[tp.f32, "M", "N"], TILES: tp.constexpr = 3,
              BUG: tp.constexpr = 0):
    """C[t*32:(t+1)*32] = 2 * A[...] for t < TILES, each tile through c_s and a bulk store."""
    c_s = tp.shared((32, 32), tp.f32, swizzle=tp.Swizzle(3, 2, 3))   # rows of 128 bytes: a TMA swizzle
    full = tp.mbarrier(1)           # warpgroup 1 wrote tile t into c_s (phase t)
    free = tp.mbarrier(1)           # warpgroup 0's store of tile t has read c_s (phase t)
    if tp.warpgroup_id() == 0:
        for t in range(TILES):
            tp.mbarrier_wait(full, t)
            tp.store_bulk(c_s, C[t * 32:t * 32 + 32, 0:32])
            if BUG == 1:
                tp.mbarrier_arrive(free)        # seeded bug: c_s handed back while the store may still read it
            else:
                tp.store_bulk_wait(c_s)
                tp.mbarrier_arrive(free)
        if BUG == 1:
            tp.store_bulk_wait(c_s)             # (one wait for all the stores, after the loop)
    else:
        for t in range(TILES):
            if t > 0:
                tp.mbarrier_wait(free, t - 1)
            tp.store(c_s, tp.load(A[t * 32:t * 32 + 32, 0:32]) * 2.0)
            tp.mbarrier_arrive(full)


@tp.kernel(threads=128, target="sm_90a")
def never_waits(A: tp.Tensor[tp.f32, "M", "N"], C: tp.Tensor[tp.f32, "M", "N"]):
    c_s = tp.shared((32, 32), tp.f32)
    tp.copy(A[0:32, 0:32], c_s)
    tp.barrier()
    tp.store_bulk(c_s, C[0:32, 0:32])


def _run(bug, m=96, n=32):
    a = np.arange(m * n, dtype=np.float32).reshape(m, n)
    c = np.full((m, n), np.nan, np.float32)
    tiles_out[(1,)](a, c, target="sm_90a", TILES=-(-m // 32), BUG=bug)
    return a, c


def test_bulk_store_on_the_interpreter():
    a, c = _run(0)
    np.testing.assert_array_equal(c, 2 * a)
    a, c = _run(0, m=80)                      # a ragged last tile: rows past the tensor are not stored
    np.testing.assert_array_equal(c, 2 * a)


def test_seeded_bug_is_real_on_the_interpreter():
    a, c = _run(1)
    assert not np.array_equal(c, 2 * a)       # a tile went out with the next tile's values


def test_verifier_reports_the_race_and_passes_the_twin():
    good = tv.verify_ir(tiles_out.ir("sm_90a", BUG=0))
    assert not good.findings, str(good)
    bad = tv.verify_ir(tiles_out.ir("sm_90a", BUG=1))
    races = [f for f in bad.findings if f.check == "race"]
    assert races and "c_s" in races[0].message, str(bad)


def test_a_store_never_waited_for_is_an_error():
    a = np.zeros((32, 32), np.float32)
    with pytest.raises(InterpreterError, match="store_bulk_wait"):
        never_waits[(1,)](a, a.copy(), target="sm_90a")


def test_store_bulk_takes_a_shared_source():
    with pytest.raises(Exception, match="bulk store source"):
        @tp.kernel(threads=128, target="sm_90a")
        def wrong(A: tp.Tensor[tp.f32, "M", "N"], C: tp.Tensor[tp.f32, "M", "N"]):
            tp.store_bulk(A[0:32, 0:32], C[0:32, 0:32])
        wrong.ir("sm_90a")
