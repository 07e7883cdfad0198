"""Two consumer roles on alternate k-tiles of one mbarrier ring (tests/verify/alternate_ring_kernels.py): the
correct kernel verifies clean at every ring size, odd (each stage released by the two consumers in turn:
sync.alternating) and even (each stage one consumer's: sync.drop_dead_roles), and computes the reference on the
interpreter; each seeded bug is caught with a counterexample and is real on the interpreter (wrong output, the
trace oracle's hazard, or a deadlock)."""

import numpy as np
import pytest
import torch

import tilepy_verify as tv
from tilepy_verify.domain import analyze
from tilepy_verify.mbarrier_arrays import expand
from tilepy_verify.sync import alternating

from . import alternate_ring_kernels as K
from . import oracle

ROWS = 13 * 32  # 13 tiles: an odd count, so the last round is partial and consumer 0 takes one tile more


def observe(bug, stages, pre=False) -> set:
    rng = np.random.default_rng(1718)
    x = rng.standard_normal((ROWS, 64)).astype(np.float32)
    y = np.full((ROWS, 64), np.nan, np.float32)
    obs = oracle.run(K.alternate.ir(BUG=bug, STAGES=stages, PRE=pre), (1,), [x, y])
    kinds = obs.classes()
    if obs.error is None and not np.array_equal(y.astype(np.float64), x.astype(np.float64)):
        kinds.add("wrong")
    return kinds


@pytest.mark.parametrize("stages", [2, 3, 4, 5])
def test_twin_verifies_clean(stages):
    report = tv.verify(K.alternate, STAGES=stages)
    assert report.ok and not report.findings, str(report)


@pytest.mark.parametrize("stages", [3, 4])
def test_twin_is_correct(stages):
    assert observe("none", stages) == set()


@pytest.mark.parametrize("stages", [2, 3, 5])
def test_pre_released_ring(stages):
    """Consumer 0 pre-releases every stage (arrivals before the loops: G 0 for each empty[s], the loops' from 1):
    clean and right; the producer waiting a round early is caught and is real."""
    report = tv.verify(K.alternate, STAGES=stages, PRE=True)
    assert report.ok and not report.findings, str(report)
    assert observe("none", stages, pre=True) == set()
    found = [f for f in tv.verify(K.alternate, STAGES=stages, PRE=True, BUG="early").errors
             if f.check == "pipeline_hazard"]
    assert found and found[0].counterexample, "the early refill is not reported"
    assert "hazard" in observe("early", stages, pre=True)


def test_odd_ring_alternates_and_even_ring_has_one_consumer_a_stage():
    """What makes the twin verify: at 3 stages every empty[s] is arrived on by both consumers in turns (proved),
    at 4 by one consumer each (the other's arrive ops there never run)."""
    odd = analyze(expand(K.alternate.ir(STAGES=3)))
    assert set(alternating(odd)) == {f"mbar:empty[{s}]" for s in range(3)}
    assert set(alternating(analyze(expand(K.alternate.ir(STAGES=3, PRE=True))))) == set(alternating(odd))
    even = analyze(expand(K.alternate.ir(STAGES=4)))
    assert alternating(even) == {}
    assert all(len(even.arrive_roles[f"mbar:empty[{s}]"]) == 1 for s in range(4))


def test_two_releases_in_one_iteration_are_not_turns():
    """The seeded 'count' form keeps one release a tile but awaits two: still turns (counted 2 a phase, so the
    deadlock check finds the phases that never complete); so is a skipped release (a label no arrival takes: a
    phase that never completes, reported as the deadlock it is). Consumer 1 releasing consumer 0's tiles as well
    is not: two arrivals in one iteration, so that mbarrier gets no edges (a finding, never a proof)."""
    for bug in ("count", "skip"):
        a = analyze(expand(K.alternate.ir(STAGES=3, BUG=bug)))
        assert set(alternating(a)) == {f"mbar:empty[{s}]" for s in range(3)}, bug
    b = analyze(expand(K.alternate.ir(STAGES=3, BUG="double")))
    assert alternating(b) == {}


@pytest.mark.parametrize("stages", [3, 4])
@pytest.mark.parametrize("bug, checks, shows", K.BUGS, ids=[b for b, *_ in K.BUGS])
def test_bug_is_caught(bug, checks, shows, stages):
    report = tv.verify(K.alternate, STAGES=stages, BUG=bug)
    found = [f for f in report.errors if f.check in checks]
    assert found, f"expected one of {sorted(checks)}:\n{report}"
    f = found[0]
    assert f.counterexample and str(f.span.file).endswith("alternate_ring_kernels.py"), str(report)
    if bug == "skip":
        assert any(f.check == "deadlock" and "'empty[1]'" in f.message for f in report.errors), str(report)


@pytest.mark.parametrize("stages", [3, 4])
@pytest.mark.parametrize("bug, checks, shows", K.BUGS, ids=[b for b, *_ in K.BUGS])
def test_bug_is_real(bug, checks, shows, stages):
    assert shows in observe(bug, stages)


def _gemm(bug, stages, kernel=K.split_k, tiles=7):
    g = torch.Generator().manual_seed(1719)
    a = torch.randn(64, tiles * 64, generator=g).bfloat16()   # 7 k-tiles: consumer 0 takes 4, consumer 1 3
    b = torch.randn(tiles * 64, 64, generator=g).bfloat16()
    c = np.zeros((64, 64), np.float32)
    d = np.zeros((64, 64), np.float32)
    obs = oracle.run(kernel.ir(STAGES=stages, BUG=bug), (1, 1), [a, b, c, d])
    ref = (a.double() @ b.double()).numpy()
    kinds = obs.classes()
    if obs.error is None and not np.allclose(c.astype(np.float64) + d, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max()):
        kinds.add("wrong")
    return kinds


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_split_k_gemm_verifies_clean(stages):
    report = tv.verify(K.split_k, STAGES=stages)
    assert report.ok and not report.findings, str(report)


def test_split_k_gemm_is_correct():
    assert _gemm("none", 3) == set()


@pytest.mark.parametrize("bug, checks, shows", K.SPLIT_BUGS, ids=[b for b, *_ in K.SPLIT_BUGS])
def test_split_k_bug(bug, checks, shows):
    for stages in (3, 4):
        report = tv.verify(K.split_k, STAGES=stages, BUG=bug)
        found = [f for f in report.errors if f.check in checks]
        assert found and found[0].counterexample, f"expected one of {sorted(checks)}:\n{report}"
    if shows is not None:
        assert shows in _gemm(bug, 3)


@pytest.mark.parametrize("stages", [3, 4, 5, 6])
def test_split_k_one_group_in_flight_verifies_clean(stages):
    """Each consumer keeps one wgmma group in flight and releases its tile k - 2's stage under `k >= 2`: the
    release check follows a group every second iteration (mbarrier_arrays._alternation), the releases' labels
    start at the first iteration with one (sync.alternating's D)."""
    report = tv.verify(K.split_k1, STAGES=stages)
    assert report.ok and not report.findings, str(report)


def test_split_k_one_group_in_flight_is_correct():
    assert _gemm("none", 4, K.split_k1, tiles=9) == set()


def test_split_k_one_group_in_flight_needs_three_stages():
    """At 2 stages tile k - 2's stage is tile k's, which the group in flight reads: a real premature release."""
    found = [f for f in tv.verify(K.split_k1, STAGES=2).errors if f.check == "pipeline_hazard"]
    assert found and "in flight" in found[0].message


@pytest.mark.parametrize("bug, checks, shows", K.SPLIT1_BUGS, ids=[b for b, *_ in K.SPLIT1_BUGS])
def test_split_k_one_group_in_flight_bug(bug, checks, shows):
    for stages in (3, 4):
        report = tv.verify(K.split_k1, STAGES=stages, BUG=bug)
        found = [f for f in report.errors if f.check in checks]
        assert found and (found[0].counterexample or found[0].check == "pipeline_hazard"), \
            f"expected one of {sorted(checks)}:\n{report}"
    if shows is not None:
        assert shows in _gemm(bug, 4, K.split_k1, tiles=9)
