"""Plain shared stores ordered across warp roles by mbarriers (issue 17 item 1): the producer warp stores a
tile into a ring stage with ordinary `tp.store`s, then arrives on `full[s]`; the consumer warp waits on
`full[s]` for that phase and reads the stage. Store -> arrive -> wait -> read is a happens-before chain, so the
correct ring verifies clean (the pattern of stdlib_kernels/conv_igemm.py, whose gathered A tiles reach the
wgmma consumers this way), while the seeded bugs beside it are caught with a counterexample: the arrive
before the store (no arrive after it), a wait on the other stage's barrier, a wait one phase early, no
wait at all, and no release of the stage (the producer overwrites it while it is read). The interpreter's
trace oracle (vector clocks over the trace, tests/verify/oracle.py) agrees with the verifier on every form:
it sees each bug as a race even where the interpreter's lock-step schedule happens to produce the right
data."""

import numpy as np
import pytest

import tilepy as tp
import tilepy_verify as tv

from . import oracle

SRC = open(__file__).read().splitlines()


@tp.kernel(threads=64, target="sm_90a")
def store_ring(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, 32], BUG: tp.constexpr = "none"):
    buf = tp.shared((32,), tp.f32, stages=2)
    full0 = tp.mbarrier(1)
    full1 = tp.mbarrier(1)
    empty0 = tp.mbarrier(1)
    empty1 = tp.mbarrier(1)
    full = (full0, full1)
    empty = (empty0, empty1)
    rounds = X.shape[0] // 64
    if tp.warp_id() == 0:                                            # producer: warp 0
        for j in range(rounds):
            for s in tp.static_range(2):
                k = 2 * j + s
                if j > 0:
                    if BUG != "noempty":
                        tp.mbarrier_wait(empty[s], j - 1)            # the consumer released stage s
                x = tp.load(X[k * 32:(k + 1) * 32])
                if BUG == "early":
                    tp.mbarrier_arrive(full[s])                      # arrives before the store
                tp.store(buf[s], x)                                  # the producer's store
                if BUG != "early":
                    tp.mbarrier_arrive(full[s])                      # stage s is full
    else:                                                            # consumer: warp 1
        acc = tp.zeros((32,), tp.f32)
        for j in range(rounds):
            for s in tp.static_range(2):
                if BUG == "phase":
                    tp.mbarrier_wait(full[s], j - 1)                 # one phase too early
                elif BUG == "wrongbar":
                    tp.mbarrier_wait(full[0], j)                     # stage 0's barrier for both stages
                elif BUG != "nowait":
                    tp.mbarrier_wait(full[s], j)
                acc += tp.load(buf[s])                               # the consumer's read
                tp.mbarrier_arrive(empty[s])                         # releases stage s
        tp.store(Y[0:32], acc)


def _line(marker):
    return next(i + 1 for i, t in enumerate(SRC) if marker in t and "_line" not in t)


def _run(bug, rounds=3):
    """(oracle observations, what the output shows: ok | poison | wrong | deadlock)."""
    x = np.random.default_rng(rounds).standard_normal(64 * rounds).astype(np.float32)
    y = np.zeros(32, np.float32)
    obs = oracle.run(store_ring.ir(BUG=bug), (1,), [x, y])
    if obs.deadlock:
        return obs, "deadlock"
    if np.isnan(y).any():
        return obs, "poison"
    return obs, "ok" if np.allclose(y, x.reshape(-1, 32).sum(0), rtol=1e-5, atol=1e-5) else "wrong"


def test_correct_ring_is_clean_in_both():
    report = tv.verify(store_ring)
    assert report.ok and not report.findings, str(report)
    obs, shows = _run("none")
    assert shows == "ok" and not obs.kinds(), (obs.race[:3], obs.pipeline_hazard[:3])


# (BUG, what the interpreter's output shows: its lock-step schedule hides some of the bugs from the data)
CASES = [("early", "ok"), ("wrongbar", "ok"), ("phase", "wrong"), ("nowait", "wrong"), ("noempty", "wrong")]


@pytest.mark.parametrize("bug, shows", CASES)
def test_seeded_bug_is_caught_in_both(bug, shows):
    report = tv.verify(store_ring, BUG=bug)
    found = [f for f in report.errors if f.check in ("pipeline_hazard", "race")]
    assert found, str(report)
    race = [f for f in found if f.check == "race"]
    assert race, str(report)  # the consumer's read and the producer's store, unordered
    assert {race[0].span.line, race[0].other_span.line} == {_line("# the consumer's read"),
                                                             _line("# the producer's store")}, str(report)
    cex = race[0].counterexample
    assert {cex["thread"] // 32, cex["other_thread"] // 32} == {0, 1} and "iteration" in cex, str(race[0])
    if bug != "noempty":  # the first read of a stage: no store happens before it
        unwritten = [f for f in found if f.check == "pipeline_hazard" and "before anything was written" in f.message]
        assert unwritten and unwritten[0].span.line == _line("# the consumer's read"), str(report)
        assert unwritten[0].counterexample["iteration"] == {"j": 0}
    obs, seen = _run(bug)
    assert seen == shows
    assert obs.race, "the trace oracle misses it"
