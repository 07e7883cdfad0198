"""Cycles of mbarrier waits through three roles over mbarrier ARRAYS (rings unrolled per stage before the
analysis: tilepy_verify/mbarrier_arrays.py). The deadlock check's hops between two stage copies take the
executions of a wait that the loop as written has (the latest iterations, `deadlock._copy_lags`), not the latest
rounds of every copy; this is the family that change must still catch: a producer, a consumer and a retiring
role pass each k-tile round a ring of STAGES stages (full[s] -> mid[s] -> free[s]; the consumer releases the
stage itself on empty[s]), and a wait one phase late anywhere closes a cycle through all three. Each late wait
is reported as a deadlock (the producer's naming the three roles) and deadlocks on the interpreter; the correct
twin verifies clean and runs (tests/verify/test_deadlock_ring.py is the same family over single mbarriers)."""

import numpy as np
import pytest

import tilepy as tp
import tilepy_verify as tv
from tilepy.errors import InterpreterError
from tilepy.interpreter import run_ir


@tp.kernel(threads=96, target="sm_90a")
def ring3(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, 32], STAGES: tp.constexpr = 3,
          BUG: tp.constexpr = "none"):
    a = tp.shared((32,), tp.f32, stages=STAGES)
    full = tp.mbarrier(1, stages=STAGES)     # producer -> consumer: a[s] holds tile k
    empty = tp.mbarrier(1, stages=STAGES)    # consumer -> producer: a[s] may be refilled
    mid = tp.mbarrier(1, stages=STAGES)      # consumer -> retirer: tile k is read
    free = tp.mbarrier(1, stages=STAGES)     # retirer -> producer: tile k is retired
    n = X.shape[0] // 32
    if tp.warp_id() == 0:                                               # producer
        for k in range(n):
            if k >= STAGES:
                tp.mbarrier_wait(empty[k % STAGES], k // STAGES - 1)
                if BUG == "producer_late":
                    tp.mbarrier_wait(free[k % STAGES], k // STAGES)         # one phase late
                else:
                    tp.mbarrier_wait(free[k % STAGES], k // STAGES - 1)
            tp.copy_bulk(X[k * 32:(k + 1) * 32], a[k % STAGES], full[k % STAGES])
            tp.mbarrier_arrive(full[k % STAGES])
    elif tp.warp_id() == 1:                                             # consumer
        acc = tp.zeros((32,), tp.f32)
        for k in range(n):
            if BUG == "consumer_late":
                if k >= STAGES:
                    tp.mbarrier_wait(full[k % STAGES], k // STAGES + 1)     # one phase late (from round 1)
                else:
                    tp.mbarrier_wait(full[k % STAGES], k // STAGES)
            else:
                tp.mbarrier_wait(full[k % STAGES], k // STAGES)
            acc += tp.load(a[k % STAGES])
            tp.mbarrier_arrive(empty[k % STAGES])
            tp.mbarrier_arrive(mid[k % STAGES])
        tp.store(Y[0:32], acc)
    else:                                                               # retirer
        for k in range(n):
            if BUG == "retirer_late":
                tp.mbarrier_wait(mid[k % STAGES], k // STAGES + 1)          # one phase late
            else:
                tp.mbarrier_wait(mid[k % STAGES], k // STAGES)
            tp.mbarrier_arrive(free[k % STAGES])


def _deadlocks(kir, tiles) -> bool:
    x = np.arange(32 * tiles, dtype=np.float32)
    y = np.zeros(32, np.float32)
    try:
        run_ir(kir, (1,), [x, y])
    except InterpreterError as exc:
        if "deadlock" in str(exc):
            return True
        raise
    return False


@pytest.mark.parametrize("stages", [2, 3, 5])
def test_twin_is_clean_and_runs(stages):
    report = tv.verify(ring3, STAGES=stages)
    assert report.ok and not report.findings, str(report)
    kir = ring3.ir(STAGES=stages)
    x = np.arange(32 * (2 * stages + 1), dtype=np.float32)
    y = np.zeros(32, np.float32)
    run_ir(kir, (1,), [x, y])
    np.testing.assert_array_equal(y, x.reshape(-1, 32).sum(axis=0, dtype=np.float64).astype(np.float32))


@pytest.mark.parametrize("stages", [2, 3, 5])
@pytest.mark.parametrize("bug", ["producer_late", "consumer_late", "retirer_late"])
def test_late_wait_is_a_deadlock_through_three_roles(bug, stages):
    report = tv.verify(ring3, STAGES=stages, BUG=bug)
    found = [f for f in report.errors if f.check == "deadlock"]
    assert found, str(report)
    assert _deadlocks(ring3.ir(STAGES=stages, BUG=bug), tiles=2 * stages + 2)
    if bug == "producer_late":
        # the cycle: the consumer waits for the producer's arrive on full, after the producer's wait on free,
        # which needs the retirer's arrive, after its wait on mid, which needs the consumer past its wait
        cycles = [f for f in found if len(f.counterexample.get("roles", ())) == 3]
        assert cycles, "\n".join(str(f) for f in found)
        assert len(cycles[0].counterexample["chain"]) == 2


def test_twin_queries_do_not_grow_with_stages():
    # 31 / 51 / 115 queries at 2 / 3 / 5 stages when each hop tried every stage copy's rounds (and asked the
    # order of each pair of copies), 15 at each with the hops by iterations of the loop as written
    q = [tv.verify(ring3, STAGES=s).stats["queries"] for s in (2, 5)]
    assert q[1] <= q[0] + 2, q
