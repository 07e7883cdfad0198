"""Seeded bugs in one stage of an mbarrier ring (tests/verify/stage_ring_kernels.py): the verifier asks the
queries of one source op over all the stage copies of a ring together (`Solver_.none_of`), so these check
that the batching hides none of them. Each bug is caught by one of its checks with a counterexample naming
the stage, and is real on the interpreter (wrong output against the float64 reference, the trace oracle's
hazard, or a deadlock); the correct twin verifies clean at every ring size and computes the reference."""

import numpy as np
import pytest

import tilepy_verify as tv

from . import oracle
from . import stage_ring_kernels as S

ROWS = 12 * 32  # 12 tiles: three rounds of 4 stages


def observe(bug, stages=4) -> set:
    rng = np.random.default_rng(1717)
    x = rng.standard_normal((ROWS, 64)).astype(np.float32)
    y = np.full((ROWS, 64), np.nan, np.float32)
    obs = oracle.run(S.ring.ir(BUG=bug, STAGES=stages), (1,), [x, y])
    kinds = obs.classes()
    if obs.error is None and not np.array_equal(y.astype(np.float64), 2.0 * x.astype(np.float64)):
        kinds.add("wrong")
    return kinds


@pytest.mark.parametrize("stages", [2, 3, 4, 6])
def test_twin_verifies_clean(stages):
    report = tv.verify(S.ring, STAGES=stages)
    assert report.ok, str(report)


def test_twin_is_correct():
    assert observe("none") == set()


@pytest.mark.parametrize("bug, checks, shows", S.BUGS, ids=[b for b, *_ in S.BUGS])
def test_bug_is_caught(bug, checks, shows):
    report = tv.verify(S.ring, BUG=bug)
    found = [f for f in report.errors if f.check in checks]
    assert found, f"expected one of {sorted(checks)}:\n{report}"
    f = found[0]
    assert f.counterexample and str(f.span.file).endswith("stage_ring_kernels.py"), str(report)


@pytest.mark.parametrize("bug, checks, shows", S.BUGS, ids=[b for b, *_ in S.BUGS])
def test_bug_is_real(bug, checks, shows):
    assert shows in observe(bug)


def test_stage_of_the_counterexample():
    """The one-stage bugs' counterexamples name the stage the bug is in (the batched query does not lose it)."""
    found = [f for f in tv.verify(S.ring, BUG="phaseearly").errors if f.check == "pipeline_hazard"]
    assert any(f.counterexample["stage"] == 3 for f in found), "\n".join(map(str, found))
    found = [f for f in tv.verify(S.ring, BUG="phaselate").errors if f.check == "deadlock"]
    assert any("'full[1]'" in f.message for f in found), "\n".join(f.message for f in found)
    found = [f for f in tv.verify(S.ring, BUG="emptylate").errors if f.check == "deadlock"]
    assert any("'empty[2]'" in f.message for f in found), "\n".join(f.message for f in found)
