"""Bulk copies are ordered by happens-before across threads, never by program order between different
threads: the issue-17 loop (every thread waits on the mbarrier and reads the stage, the first thread then
issues the next bulk copy into it) is a hazard without the block barrier between the reads and the copy, and
clean with it. The interpreter's trace oracle (vector clocks, tests/verify/oracle.py) agrees on both forms,
and a Hypothesis family of bulk-copy rings (uniform and warp-specialized, varied phases, synchronization,
stages and read layouts) checks the verifier against the oracle both ways."""


import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tilepy as tp
import tilepy_verify as tv

from . import gen, oracle
from .test_soundness import SETTINGS, assert_replayable, assert_sound

SRC = open(__file__).read().splitlines()


@tp.kernel(threads=64, target="sm_90a")
def bulk_loop(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.f32, "R", 64], BLOCK: tp.constexpr = 64,
              BUG: tp.constexpr = "none"):
    buf = tp.shared((BLOCK,), tp.f32)
    bar = tp.mbarrier(1)
    tp.copy_bulk(X[0:BLOCK], buf, bar)
    tp.mbarrier_arrive(bar)
    for k in range(X.shape[0] // BLOCK):
        tp.mbarrier_wait(bar, k)                                  # every thread: tile k landed
        y = tp.load(buf, layout=tp.blocked((BLOCK,), 64, 1))       # the reads of tile k
        tp.store(Y[k, 0:BLOCK], y)
        if BUG != "nobarrier":
            tp.barrier()                                          # every thread finished reading buf
        tp.copy_bulk(X[(k + 1) * BLOCK:(k + 2) * BLOCK], buf, bar)  # thread 0 refills buf
        tp.mbarrier_arrive(bar)


def _line(marker):
    return next(i + 1 for i, t in enumerate(SRC) if marker in t and "_line" not in t)


def _run(kir, tiles=3):
    x = np.arange(64 * tiles, dtype=np.float32)
    y = np.full((tiles, 64), np.nan, np.float32)
    obs = oracle.run(kir, (1,), [x, y])
    return obs, np.array_equal(y, x.reshape(tiles, 64))


def test_issue_loop_without_barrier_is_a_hazard_in_both():
    kir = bulk_loop.ir(BUG="nobarrier")
    report = tv.verify(kir)
    found = [f for f in report.errors if f.check == "pipeline_hazard"]
    assert found, str(report)
    f = found[0]
    assert {f.span.line, f.other_span.line} == {_line("# the reads of tile k"), _line("# thread 0 refills buf")}
    cex = f.counterexample
    assert cex["thread"] != cex["other_thread"] and cex["stage"] == 0
    obs, data_ok = _run(kir)
    assert data_ok  # the interpreter runs in lock step: the data cannot show it ...
    assert obs.pipeline_hazard and obs.pipeline_hazard[0]["bulk"]  # ... happens-before does
    assert any(h["thread"] != h["copy_thread"] for h in obs.pipeline_hazard)


def test_issue_loop_with_barrier_is_clean_in_both():
    kir = bulk_loop.ir()
    report = tv.verify(kir)
    assert report.ok and not report.findings, str(report)
    obs, data_ok = _run(kir)
    assert data_ok and not obs.kinds(), obs.pipeline_hazard[:3]


@pytest.mark.parametrize("sync, clean", [("barrier", True), ("mbar", True), ("none", False)])
def test_oracle_orders_by_barriers_and_mbarriers_only(sync, clean):
    kir = gen.load(gen.bulk_source(2, "uniform", 0, sync, 0, "other", True), "gen").ir()
    x = np.arange(2 * 32 * 3, dtype=np.float32)
    obs = oracle.run(kir, (1,), [x, np.zeros((6, 32), np.float32)])
    assert (not obs.kinds()) == clean
    assert tv.verify(kir).ok == clean


bulk_params = st.fixed_dictionaries({
    "stages": st.integers(1, 2),
    "roles": st.sampled_from(["uniform", "ws"]),
    "wait_off": st.sampled_from([0, 0, 0, -1]),
    "sync": st.sampled_from(["barrier", "mbar", "none"]),
    "stage_off": st.sampled_from([0, 0, 0, 1]),
    "read_layout": st.sampled_from(["other", "same"]),
    "producer_waits": st.sampled_from([True, True, False]),
})


@SETTINGS
@given(p=bulk_params, rounds=st.integers(1, 3))
def test_bulk_family_sound_precise_and_replayable(p, rounds):
    if p["roles"] == "ws" and p["sync"] == "mbar":
        p = {**p, "sync": "barrier"}  # a consumer role has no block barrier: both mean "arrive on empty"
    if p["roles"] == "uniform":
        p = {**p, "producer_waits": True}
    kir = gen.load(gen.bulk_source(**p), "gen").ir()
    report = tv.verify(kir)
    kinds = _observe(kir, p["stages"], rounds)
    assert_sound(report, kinds)
    for f in report.errors:  # replay each error with enough rounds for its counterexample's iterations
        cex = f.counterexample
        its = [*(cex.get("iteration") or {}).values(), *(cex.get("other_iteration") or {}).values(), 0]
        seen = _observe(kir, p["stages"], max(rounds, max(its) + 2))
        assert_replayable(tv.Report(report.kernel, report.target, {}, [f], 0, report.checks, {}), seen)
    correct = p["wait_off"] == 0 and p["sync"] != "none" and p["stage_off"] == 0 and p["producer_waits"]
    if correct:
        assert report.ok and not kinds, (str(report), kinds)


def _observe(kir, S, rounds):
    x = np.random.default_rng(rounds).standard_normal(S * 32 * rounds).astype(np.float32)
    y = np.full((S * rounds, 32), np.nan, np.float32)
    obs = oracle.run(kir, (1,), [x, y])
    kinds = obs.kinds()
    if not obs.error and not np.array_equal(y, x.reshape(-1, 32)):
        kinds.add("poison" if np.isnan(y).any() else "pipeline_hazard")  # stale or never landed data
    return kinds
