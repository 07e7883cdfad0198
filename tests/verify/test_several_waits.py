"""Several wait ops on the copies' mbarrier in the reading role (reaching.cross_role, `_the_wait`): the read sees
the copies of the highest phase its role has waited for, which need not be the latest wait's (a later wait for an
older phase returns at once and hides nothing). tests/verify/several_waits_kernels.py: `twice` (two waits an
iteration, their phases varied) and `prologue` (gemm_persistent DEFER=2's shape: a tile's prologue waits on its
first slot's stage before the ring waits on it again).

Each case runs on the interpreter with the dynamic tag tracker (tests/verify/dynamic_tags.py) and the trace oracle:
every assertion the run sees fail is a tag_assertion finding (or a reported hazard of the run), every hazard of
the run is reported, and the correct forms verify clean."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tilepy_verify as tv
from tilepy_verify import reaching, symbolic_ring

from . import oracle
from . import several_waits_kernels as K
from .test_soundness import SETTINGS, assert_sound, assert_tags_sound, run_tags

ROWS = 8 * 32  # 8 tiles of 32 rows: four rounds of a 2-stage ring


def _twice_args(seed=3):
    x = np.random.default_rng(seed).standard_normal((ROWS, 64)).astype(np.float32)
    return x, np.full((ROWS, 64), np.nan, np.float32)


def _prologue_args(cols=192, seed=5):
    x = np.random.default_rng(seed).standard_normal((4 * 32, cols)).astype(np.float32)
    return x, np.full((4 * 32, cols), np.nan, np.float32)


def _run(kir, args):
    """(what the trace oracle shows, the dynamic tag tracker) of one run."""
    kinds = oracle.run(kir, (1,), [a.copy() for a in args]).kinds()
    return kinds, run_tags(kir, (1,), [a.copy() for a in args])


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("second", [0, -1])
def test_two_waits_verify_clean(stages, second):
    """The second wait for the same phase, or for the one before (which returns at once): both reads see tile k."""
    kir = K.twice.ir(STAGES=stages, SECOND=second)
    report = tv.verify(kir)
    assert report.ok and not report.findings, str(report)
    x, y = _twice_args()
    kinds, tracker = _run(kir, (x, y))
    assert not kinds and tracker.ok
    oracle.run(kir, (1,), [x, y])
    np.testing.assert_array_equal(y, x + x)


def test_older_claim_after_a_stale_wait_is_caught():
    """The second read after a wait for the older phase claims the older tile: the data is tile k (the first wait
    landed it), so the claim is wrong, and reported with a counterexample; the run sees the assertion fail."""
    kir = K.twice.ir(SECOND=-1, CLAIM=-1)
    report = tv.verify(kir)
    found = report.by_check("tag_assertion")
    assert found and found[0].counterexample, str(report)
    kinds, tracker = _run(kir, _twice_args())
    assert not kinds and not tracker.ok
    assert_tags_sound(report, tracker)


def test_the_latest_wait_alone_would_prove_the_older_claim(monkeypatch):
    """Why the highest phase and not the latest wait: taking the latest wait op (phase k // S - 1) as the one that
    decides which copy the read sees proves the wrong claim above (this is what `_highest` rules out). On the stage
    copies (reaching.py's rule; the symbolic ring's own, symbolic_ring._reader_waits, lets the higher wait of the
    iteration decide)."""
    monkeypatch.setattr(symbolic_ring, "ENABLED", False)
    monkeypatch.setattr(reaching, "_highest", lambda *a: True)
    monkeypatch.setattr(tv, "_CACHE", {})  # (the report of this IR with the rule is cached)
    report = tv.verify(K.twice.ir(SECOND=-1, CLAIM=-1))
    assert report.ok, str(report)


def test_wait_for_an_older_phase_first_is_caught():
    """The first wait a phase early: the first read meets the stage before its copy landed (and the ring's refill
    races it): pipeline hazards, as the run shows."""
    kir = K.twice.ir(FIRST=-1)
    report = tv.verify(kir)
    assert report.by_check("pipeline_hazard"), str(report)
    kinds, _ = _run(kir, _twice_args())
    assert kinds & {"pipeline_hazard", "race"}
    assert_sound(report, kinds)


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("cols", [64, 192])
def test_prologue_wait_verifies_clean(stages, cols):
    kir = K.prologue.ir(STAGES=stages)
    report = tv.verify(kir)
    assert report.ok and not report.findings, str(report)
    x, y = _prologue_args(cols)
    kinds, tracker = _run(kir, (x, y))
    assert not kinds and tracker.ok
    oracle.run(kir, (1,), [x, y])
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("bug", ["stale", "other"])
def test_prologue_bugs_are_caught(bug):
    """The prologue waits a ring turn early ("stale"), or reads its second slot's stage after waiting for the first
    ("other"): the read may meet a copy in flight: pipeline hazards with a counterexample, as the run shows."""
    kir = K.prologue.ir(BUG=bug)
    report = tv.verify(kir)
    found = report.by_check("pipeline_hazard")
    assert found and found[0].counterexample, str(report)
    kinds, tracker = _run(kir, _prologue_args())
    assert kinds & {"pipeline_hazard", "race"} or not tracker.ok
    assert_sound(report, kinds)


@SETTINGS
@given(first=st.sampled_from([0, -1]), second=st.sampled_from([0, -1, 1]), claim=st.sampled_from([0, -1]),
       stages=st.sampled_from([2, 3]))
def test_two_waits_sound_against_the_interpreter(first, second, claim, stages):
    """Every phase pair and claim: what the run shows (hazards, failed assertions) is reported, and the right form
    (the first wait for tile k's phase, the claim tile k) verifies without a tag finding. A second wait a phase
    late (+1) deadlocks the run at the last round: reported as a deadlock."""
    kir = K.twice.ir(STAGES=stages, FIRST=first, SECOND=second, CLAIM=claim)
    report = tv.verify(kir)
    obs = oracle.run(kir, (1,), list(_twice_args()))
    kinds = obs.kinds()
    assert_sound(report, kinds)
    if second == 1:
        assert "deadlock" in kinds and report.by_check("deadlock"), str(report)
        return
    tracker = run_tags(kir, (1,), list(_twice_args()))
    assert_tags_sound(report, tracker, hazards=lambda: kinds)
    if first == 0 and claim == 0:
        assert report.ok and not report.findings, str(report)
