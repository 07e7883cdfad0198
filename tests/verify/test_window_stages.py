"""Issue 17 item 4's case with the stage count as a parameter (tests/verify/window_stages_kernels.py): a
rolling window of STAGES shared row tiles whose every adjacent pair of stages is asserted to hold consecutive
row tiles. It verifies clean for STAGES 2..8, a read of the wrong stage is a tag finding at its assertion for
each, and the solver queries per assertion stay nearly flat (each read's candidate writes are summarized once,
reaching._summary: no per-stage unrolling); both forms are shown on the interpreter against float64."""

import numpy as np
import pytest

import tilepy_verify as tv
from tests.verify.window_stages_kernels import window

STAGES = (2, 3, 4, 6, 8)


def _run(stages, bug, tiles=7, br=8, bc=64):
    rng = np.random.default_rng(stages)
    x = rng.standard_normal((tiles * br, bc)).astype(np.float32)
    y = np.zeros_like(x)
    window[(1,)](x, y, BR=br, BC=bc, STAGES=stages, BUG=bug)
    ref = np.zeros((tiles * br, bc))
    t = x.astype(np.float64).reshape(tiles, br, bc)
    for k in range(stages - 2, tiles - 1):      # Y's row tile k: X's row tiles k + 2 - STAGES .. k + 1
        ref[k * br:(k + 1) * br] = t[k + 2 - stages:k + 2].sum(axis=0)
    return y, ref


@pytest.mark.parametrize("stages", [3, 6])
def test_window_on_the_interpreter(stages):
    y, ref = _run(stages, "none")
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    y, ref = _run(stages, "stage")
    assert np.abs(y - ref).max() > 1e-2          # the oldest tile replaced by the newest


def _assertions(stages):
    return stages - 1


@pytest.mark.parametrize("stages", STAGES)
def test_window_verifies_clean(stages):
    report = tv.verify(window, STAGES=stages)
    assert report.ok and not report.findings, str(report)


@pytest.mark.parametrize("stages", STAGES)
def test_wrong_stage_is_a_tag_finding(stages):
    report = tv.verify(window, STAGES=stages, BUG="stage")
    tags = [f for f in report.findings if f.check == "tag_assertion"]
    assert tags and all(f.counterexample for f in tags), str(report)
    assert {f.check for f in report.findings} == {"tag_assertion"}, str(report)


def test_queries_per_assertion_stay_nearly_flat():
    per = {s: tv.verify(window, STAGES=s).stats["queries"] / _assertions(s) for s in (3, 8)}
    assert per[8] <= 2 * per[3], per
