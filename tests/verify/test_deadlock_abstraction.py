"""The deadlock check asks a wait's missing-arrival and cycle terms through their linear abstraction with the
nonlinear lemmas first, each term on its own (tilepy_verify/checks/tickets.py `each_unsat_by_abstraction`),
where they hold products or run-time divisions. test_persistent_ring's `tile_phase` bug (a flat persistent
ring whose phases are (g % k_tiles) // STAGES, k_tiles a run-time size) has no deadlock (it reads stale
stages: a pipeline hazard), and Z3's nonlinear search on the disjunction of its cycles ran 45-60 s, once out of
its 60 s ("not proven"). With a 10 s cap per query the check must now prove it: each cycle's abstraction is
unsatisfiable once `x % y <= x` (x >= 0, y > 0) is among the lemmas. A real deadlock of the same ring
(no pre-release) is still found, with a counterexample."""

import pytest

import tilepy_verify as tv
from tests.verify.test_persistent_ring import SMALL, ring
from tilepy.symbolic import Var
from tilepy_verify.checks.tickets import linear_abstraction, nonlinear_lemmas
from tilepy_verify.vc import AND, Solver_, cmp, evaluate_term


@pytest.fixture
def short_queries(monkeypatch):
    monkeypatch.setenv("TILEPY_VERIFY_QUERY_TIMEOUT", "10")


@pytest.mark.parametrize("params", [SMALL, dict(SMALL, STAGES=3)])
def test_stale_phase_ring_has_no_deadlock(short_queries, params):
    report = tv.verify(ring, target="sm_90a", checks=["deadlock"], BUG="tile_phase", **params)
    assert report.findings == [], [f.message for f in report.findings]


def test_no_prerelease_is_still_a_deadlock(short_queries):
    report = tv.verify(ring, target="sm_90a", checks=["deadlock"], BUG="no_prerelease", **SMALL)
    dl = [f for f in report.findings if f.check == "deadlock" and f.message.startswith("deadlock")]
    assert dl and dl[0].counterexample, [f.message for f in report.findings]


def test_remainder_at_most_dividend_lemma():
    x, y = Var("x"), Var("y")
    lemmas = nonlinear_lemmas(cmp("==", x % y, 3))
    for xv in range(-7, 8):
        for yv in range(-4, 5):
            if yv == 0:
                continue
            env = {"x": xv, "y": yv}
            assert all(evaluate_term(lm, env) for lm in lemmas), env
    # and it is among them: at x = 2, y = 5 only it rules out the remainder 3 (0 <= 3 < 5 holds)
    class Ctx:
        pass

    s = Solver_()
    try:
        ctx = Ctx()
        ctx.solver = s
        q = AND(cmp("==", x, 2), cmp("==", y, 5), cmp("==", x % y, 3), *lemmas)
        assert s.check(linear_abstraction(ctx, q), small=False) is None
    finally:
        s.close()
