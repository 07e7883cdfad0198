"""tp.store_bulk's read of its shared source ends at a store_bulk_wait of the issuing thread that runs after the
issue, wherever it is: later in the same iteration, in the next iteration before the tile is written again (the
wait -> block barrier -> write chain of two output tiles handed over across iterations), or after the loop. The
verifier looks for such a wait among the earliest instances after the issue (this and the next iteration), each
under its own path condition, and needs a block barrier between it and another thread's write. Each correct
kernel verifies clean and computes the reference on the interpreter; each seeded bug is reported as a race on the
tile and is real on the interpreter (which reads the source at the wait, the latest moment the hardware may: a
tile goes out with a later tile's values, or the trace oracle sees that read race with another thread's write)."""

import numpy as np
import pytest

import tilepy as tp
import tilepy_verify as tv

from . import oracle


@tp.kernel(threads=128, target="sm_90a")
def two_tiles(A: tp.Tensor[tp.f32, "M", 32], C: tp.Tensor[tp.f32, "M", 32], BUG: tp.constexpr = "none"):
    """C = 2 A, tile t of 32 rows through shared tile o_s[t % 2] and a bulk store: the issuing thread waits for
    the earlier tiles' stores (tile t - 2's read of o_s[t % 2] among them) before tile t's first barrier."""
    o_s = tp.shared((32, 32), tp.f32, stages=2)
    n = A.shape[0] // 32
    for t in range(n):
        x = tp.load(A[t * 32:t * 32 + 32, 0:32], layout=tp.blocked((32, 32), 128, 4))
        if BUG == "none":
            tp.store_bulk_wait(o_s[(t + 1) % 2])    # (the wait is for all of the thread's stores, whatever tile)
            tp.barrier()
        elif BUG == "late":
            tp.barrier()
            tp.store_bulk_wait(o_s[t % 2])          # seeded: after the barrier, so the others write too soon
        elif BUG == "nowait":
            tp.barrier()                            # seeded: no wait in the loop (only after it)
        elif BUG == "alternate":
            if t % 2 == 1:
                tp.store_bulk_wait(o_s[t % 2])      # correct too: the wait at odd t ends tiles t - 1 and t - 2
            tp.barrier()
        elif BUG == "third":
            if t % 3 == 0:
                tp.store_bulk_wait(o_s[t % 2])      # seeded: at t = 3 j + 2 tile 3 j's store is not waited for
            tp.barrier()
        tp.store(o_s[t % 2], x * 2.0)
        tp.barrier()
        tp.store_bulk(o_s[t % 2], C[t * 32:t * 32 + 32, 0:32])
    tp.store_bulk_wait(o_s[0])


@tp.kernel(threads=128, target="sm_90a")
def one_tile(A: tp.Tensor[tp.f32, "M", 32], C: tp.Tensor[tp.f32, "M", 32], BUG: tp.constexpr = "none"):
    """C = 2 A through one shared tile: the issuing thread waits for tile t's store later in iteration t
    ("none") or at the top of iteration t + 1 ("top"), and a barrier after the wait lets the others write."""
    c_s = tp.shared((32, 32), tp.f32)
    n = A.shape[0] // 32
    for t in range(n):
        x = tp.load(A[t * 32:t * 32 + 32, 0:32], layout=tp.blocked((32, 32), 128, 4))
        if BUG == "top":
            tp.store_bulk_wait(c_s)
            tp.barrier()
        elif BUG == "late":
            tp.barrier()
            tp.store_bulk_wait(c_s)                 # seeded: after the barrier, so the others write too soon
        tp.store(c_s, x * 2.0)
        tp.barrier()
        tp.store_bulk(c_s, C[t * 32:t * 32 + 32, 0:32])
        if BUG == "none":
            tp.store_bulk_wait(c_s)
            tp.barrier()
        elif BUG == "even":
            if t % 2 == 1:
                tp.store_bulk_wait(c_s)             # seeded: an even tile's store is not waited for
            tp.barrier()
    if BUG != "none":
        tp.store_bulk_wait(c_s)


CLEAN = ("none", "alternate", "top")
CASES = [(two_tiles, "none"), (two_tiles, "alternate"), (two_tiles, "nowait"), (two_tiles, "third"),
         (one_tile, "none"), (one_tile, "top"), (one_tile, "even")]


def _run(kernel, bug, m=7 * 32):
    """(A, C, the trace oracle's classes) of one run on the interpreter."""
    a = np.random.default_rng(17).standard_normal((m, 32)).astype(np.float32)
    c = np.full((m, 32), np.nan, np.float32)
    obs = oracle.run(kernel.ir("sm_90a", BUG=bug), (1,), [a, c])
    assert obs.error is None, obs.error
    return a, c, obs.classes()


@pytest.mark.parametrize("kernel, bug", CASES, ids=[f"{k.name}-{b}" for k, b in CASES])
def test_verifier_and_interpreter_agree(kernel, bug):
    report = tv.verify(kernel, BUG=bug)
    a, c, seen = _run(kernel, bug)
    right = np.array_equal(c.astype(np.float64), 2.0 * a.astype(np.float64))
    if bug in CLEAN:
        assert report.ok and not report.findings, str(report)
        assert right and seen == set()
    else:
        races = [f for f in report.errors if f.check == "race"]
        assert races and ("'o_s'" in races[0].message or "'c_s'" in races[0].message), str(report)
        assert races[0].counterexample["thread"] != races[0].counterexample["other_thread"]
        assert not right                            # a tile went out with a later tile's values


def test_wait_after_the_barrier_is_a_race():
    """The wait after tile t + 1's first barrier instead of before it: the other threads pass the barrier and
    write c_s while tile t's store may still read it. The interpreter runs the threads in lock step (thread 0's
    wait, where it reads c_s for the store, before anyone's write), so the output is right there; the trace oracle
    sees that read and thread 1's write in one barrier interval."""
    report = tv.verify(one_tile, BUG="late")
    races = [f for f in report.errors if f.check == "race"]
    assert races and "'c_s'" in races[0].message, str(report)
    assert races[0].counterexample["other_iteration"]["t"] == races[0].counterexample["iteration"]["t"] - 1
    a, c, seen = _run(one_tile, "late")
    assert np.array_equal(c.astype(np.float64), 2.0 * a.astype(np.float64))
    assert "hazard" in seen
