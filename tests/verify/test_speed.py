"""Tag proofs through a multi-stage rolling window use per-read summaries (reaching.py `_summary`): the
writes that can reach a read are decided once per read, not multiplied out into element queries. The
three-stage window of tests/verify/window_kernels.py takes a few dozen solver queries (536 and about 5 s
before), stays sound (a wrong stage is still a counterexample) and agrees with the interpreter."""

import numpy as np
import pytest

import tilepy_verify as tv

from .window_kernels import window3


@pytest.mark.parametrize("asy", [False, True])
def test_window_proof_is_clean_and_small(asy):
    window3._cache.clear()
    report = tv.verify(window3, ASYNC=asy)
    assert report.ok and not report.findings, str(report)
    assert report.stats["queries"] <= 60  # 536 / 549 queries with per-element unrolling of the window


def test_window_wrong_stage_is_a_tag_counterexample():
    report = tv.verify(window3, ASYNC=False, BUG="stage")
    f = [f for f in report.errors if f.check == "tag_assertion"]
    assert f and "fails" in f[0].message, str(report)
    # the interpreter agrees: the bottom row is the tile from three rows back
    x = np.arange(6 * 8 * 128, dtype=np.float32).reshape(48, 128)
    for bug in ("none", "stage"):
        y = np.zeros_like(x)
        window3[(1,)](x, y, ASYNC=False, BUG=bug)
        ref = x[:-16] + x[8:-8] + x[16:]
        assert np.array_equal(y[8:-8], ref) == (bug == "none")
