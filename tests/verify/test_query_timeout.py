"""A solver query that Z3 cannot decide in time is never taken as a proof: the checks' solver raises
`SolverUnknown`, which `verify_ir` turns into an error finding of the check that asked; the analysis's own
solver answers "not proven" (a model, not None)."""

import pytest

from tilepy_verify.vc import AND, Solver_, SolverUnknown, cmp, query_timeout_s

from .undecidable import FERMAT, X, copy_kernel, stuck_race_errors


def test_timeout_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("TILEPY_VERIFY_QUERY_TIMEOUT", "2.5")
    assert query_timeout_s() == 2.5
    monkeypatch.setenv("TILEPY_VERIFY_QUERY_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="TILEPY_VERIFY_QUERY_TIMEOUT"):
        query_timeout_s()
    monkeypatch.delenv("TILEPY_VERIFY_QUERY_TIMEOUT")
    assert query_timeout_s() == 300.0  # a safety net only: the resource budget steers (test_solver_budget.py)


def test_unknown_raises_in_the_checks_solver(monkeypatch):
    monkeypatch.setenv("TILEPY_VERIFY_QUERY_TIMEOUT", "0.05")
    s = Solver_()
    try:
        with pytest.raises(SolverUnknown, match="gave up"):
            s.check(FERMAT, small=False)
        # a decidable query still gets its answer on the same solver afterwards
        assert s.check(AND(cmp(">=", X, 3), cmp("<=", X, 2))) is None
        assert s.check(cmp("==", X, 5), want_vars=("x#0",))["x#0"] == 5
    finally:
        s.close()


def test_unknown_is_not_a_proof_for_the_analysis(monkeypatch):
    monkeypatch.setenv("TILEPY_VERIFY_QUERY_TIMEOUT", "0.05")
    s = Solver_(unknown="possible")
    try:
        assert s.check(FERMAT, small=False) is not None  # None would mean "proven impossible"
    finally:
        s.close()


def test_an_undecided_check_is_an_error_finding(monkeypatch):
    monkeypatch.setenv("TILEPY_VERIFY_QUERY_TIMEOUT", "0.05")
    errs = stuck_race_errors(monkeypatch, BLOCK=64)
    assert "not proven" in errs[0].message and "TILEPY_VERIFY_QUERY_TIMEOUT" in errs[0].message
    assert errs[0].span.line == copy_kernel.ir(BLOCK=64).line
