"""Deadlocks of mbarrier protocols (tilepy_verify/checks/deadlock.py): the most common mbarrier bug, a
producer that waits on `empty[s]` for the wrong phase, is a cycle of waits between the two roles; a role that
waits for its own later arrival; and missing arrivals. Each finding names the roles, mbarriers, phases,
iterations and lines, and the interpreter deadlocks on the same kernel; the fixed twins verify clean."""


import numpy as np
import pytest

import tilepy as tp
import tilepy_verify as tv
from tilepy.errors import InterpreterError
from tilepy.interpreter import run_ir

SRC = open(__file__).read().splitlines()


@tp.kernel(threads=64, target="sm_90a")
def ring2(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, 32], BUG: tp.constexpr = "none"):
    buf = tp.shared((32,), tp.f32, stages=2)
    full0 = tp.mbarrier(1)
    full1 = tp.mbarrier(1)
    empty0 = tp.mbarrier(1)
    empty1 = tp.mbarrier(1)
    full = (full0, full1)
    empty = (empty0, empty1)
    rounds = X.shape[0] // 64
    if tp.warp_id() == 0:                                           # producer
        for j in range(rounds):
            for s in tp.static_range(2):
                if j > 0:
                    if BUG == "late_empty":
                        tp.mbarrier_wait(empty[s], j)               # producer: one phase too late
                    else:
                        tp.mbarrier_wait(empty[s], j - 1)           # producer: stage s released
                tp.copy_bulk(X[(2 * j + s) * 32:(2 * j + s + 1) * 32], buf[s], full[s])
                tp.mbarrier_arrive(full[s])                         # producer arrives on full
    else:                                                           # consumer
        acc = tp.zeros((32,), tp.f32)
        for j in range(rounds):
            for s in tp.static_range(2):
                tp.mbarrier_wait(full[s], j)                        # consumer: stage s landed
                acc += tp.load(buf[s])
                if BUG != "skip_release" or j == 0:
                    tp.mbarrier_arrive(empty[s])                    # consumer releases s
        tp.store(Y[0:32], acc)


@tp.kernel(threads=64, target="sm_90a")
def self_wait(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "R", 32], BUG: tp.constexpr = "none"):
    buf = tp.shared((32,), tp.f32)
    bar = tp.mbarrier(1)
    for k in range(X.shape[0] // 32):
        tp.copy_bulk(X[k * 32:(k + 1) * 32], buf, bar)
        if BUG == "before":
            tp.mbarrier_wait(bar, k)                                # self: waits before its own arrive
            tp.mbarrier_arrive(bar)                                 # self: the arrival
        else:
            tp.mbarrier_arrive(bar)
            tp.mbarrier_wait(bar, k)
        tp.store(Y[k, 0:32], tp.load(buf, layout=tp.blocked((32,), 64, 1)))
        tp.barrier()


def line(marker):
    return next(i + 1 for i, t in enumerate(SRC) if marker in t and "line(" not in t)


def interpreter_deadlocks(kernel, bug, tiles=4):
    x = np.arange(32 * tiles, dtype=np.float32)
    y = np.zeros((tiles, 32) if kernel is self_wait else 32, np.float32)
    try:
        run_ir(kernel.ir(BUG=bug), (1,), [x, y])
    except InterpreterError as exc:
        return "deadlock" in str(exc)
    return False


def test_wrong_empty_phase_is_a_cycle_of_waits():
    report = tv.verify(ring2, BUG="late_empty")
    found = [f for f in report.errors if f.check == "deadlock"]
    assert found, str(report)
    f = found[0]
    cex = f.counterexample
    waits = {f.span.line, f.other_span.line}
    assert waits == {line("# producer: one phase too late"), line("# consumer: stage s landed")}, str(f)
    assert set(cex["roles"]) == {"threads 0..31", "threads 32..63"}
    assert {cex["barrier"], cex["other_barrier"]} in ({"empty0", "full0"}, {"empty1", "full1"})
    assert cex["phase"] is not None and cex["other_phase"] is not None and "cycle" in cex["detail"]
    text = str(f)
    assert f"line {line('# producer arrives on full')}" in text and f"line {line('# consumer releases s')}" in text
    assert interpreter_deadlocks(ring2, "late_empty")


def test_waiting_for_own_later_arrival():
    report = tv.verify(self_wait, BUG="before")
    found = [f for f in report.errors if f.check == "deadlock"]
    assert found, str(report)
    f = found[0]
    assert f.span.line == line("# self: waits before its own arrive")
    assert f.other_span.line == line("# self: the arrival")
    assert f.counterexample["roles"] == ("all threads",) and f.counterexample["phase"] == 0
    assert interpreter_deadlocks(self_wait, "before")


def test_missing_release_never_completes():
    report = tv.verify(ring2, BUG="skip_release")
    found = [f for f in report.errors if f.check == "deadlock"]
    assert found and found[0].span.line == line("# producer: stage s released"), str(report)
    j = found[0].counterexample["iteration"]["j"]
    assert j >= 2  # round 1 only needs round 0's release
    assert interpreter_deadlocks(ring2, "skip_release", tiles=2 * (j + 1))
    assert not interpreter_deadlocks(ring2, "skip_release", tiles=4)  # two rounds: the release is not needed


@pytest.mark.parametrize("kernel", [ring2, self_wait])
def test_fixed_twins_are_deadlock_free(kernel):
    report = tv.verify(kernel)
    assert report.ok and not report.findings, str(report)
    assert not interpreter_deadlocks(kernel, "none")


def test_negative_phase_returns_at_once():
    """mbarrier_wait(bar, -1) needs no arrival: not a deadlock (the hazard it causes is reported instead)."""
    from . import gen

    kir = gen.load(gen.bulk_source(1, "uniform", -1, "barrier", 0, "other", True), "gen").ir()
    checks = {f.check for f in tv.verify(kir).errors}
    assert "deadlock" not in checks and "pipeline_hazard" in checks
