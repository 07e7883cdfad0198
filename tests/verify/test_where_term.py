"""`tp.where` / a conditional expression on two integer scalars is the term Select(c, a, b) (vc.py, Z3's
if-then-else), like min / max: it keeps its meaning under a negation and renames with its arguments in every
instance of a point. It used to be a fresh value with (c -> v == a) and (not c -> v == b) in the path
condition: a negated path (deadlock's "no arrive completes the phase", pipeline's "not ordered") let the
solver pick v outside that definition, and the sync instances (an earlier iteration's wait) never renamed it.

`ring_where` is a two-role mbarrier ring whose phases are conditional expressions (the producer's wait from
its third iteration, the consumer's `k // STAGES if k >= 0 else 0`): the old model reported two deadlocks and
three pipeline hazards on the correct kernel; now it verifies clean, and the producer waiting one phase late
(BUG "late") is a deadlock, as on the interpreter."""

import numpy as np
import pytest

import tilepy as tp
import tilepy_verify as tv
from tilepy.errors import InterpreterError
from tilepy.symbolic import Var
from tilepy_verify.vc import AND, NOT, Select, Solver_, cmp, evaluate_term, select, subst, term_vars


@tp.kernel(threads=96)
def ring_where(X: tp.Tensor[tp.f32, "N", 32], Y: tp.Tensor[tp.f32, "N", 32], STAGES: tp.constexpr = 2,
               BUG: tp.constexpr = "none"):
    buf = tp.shared((32,), tp.f32, stages=STAGES)
    full = tp.mbarrier(1, stages=STAGES)
    empty = tp.mbarrier(1, stages=STAGES)
    n = X.shape[0]
    if tp.warp_id() == 0:
        for k in range(n):
            ph = k // STAGES - 1 if k >= STAGES else 0
            if k >= STAGES:
                if BUG == "late":
                    tp.mbarrier_wait(empty[k % STAGES], ph + 1)
                else:
                    tp.mbarrier_wait(empty[k % STAGES], ph)
            tp.copy_bulk(X[k, :], buf[k % STAGES], full[k % STAGES])
            tp.mbarrier_arrive(full[k % STAGES])
    else:
        for k in range(n):
            q = k // STAGES if k >= 0 else 0
            tp.mbarrier_wait(full[k % STAGES], q)
            x = tp.load(buf[k % STAGES])
            tp.mbarrier_arrive(empty[k % STAGES])
            tp.store(Y[k, :], x)


def test_select_keeps_its_meaning_under_a_negation():
    x, y, a, b = Var("x"), Var("y"), Var("a"), Var("b")
    v = Select(cmp("<", x, y), a, b)
    s = Solver_()
    try:
        # the definition holds in every model, even where the query negates a formula over v
        assert s.check(NOT(AND(cmp("<", x, y), cmp("!=", v, a)))) is not None   # satisfiable: x >= y
        assert s.check(AND(cmp("<", x, y), cmp("!=", v, a))) is None
        assert s.check(AND(NOT(cmp("<", x, y)), cmp("!=", v, b))) is None
        assert s.check(AND(cmp("==", x, 3), cmp("==", y, 1), cmp("==", a, 10), cmp("==", v - b, 5))) is None
        model = s.check(AND(cmp("==", x, 1), cmp("==", y, 3), cmp("==", a, 10), cmp("==", v - b, 5)))
        assert model is not None and model["b"] == 5
    finally:
        s.close()
    env = {"x": 1, "y": 4, "a": 7, "b": 9}
    assert evaluate_term(v + 1, env) == 8 and evaluate_term(v, {**env, "x": 5}) == 9
    # renaming reaches the condition; a constant condition folds
    w = subst(v, {"x": Var("x@1")})
    assert isinstance(w, Select) and "x@1" in term_vars(w) and "x" not in term_vars(w)
    assert subst(v, {"x": 0, "y": 2}) == a and select(True, a, b) is a and select(cmp("<", x, y), a, a) is a


def _run(bug, n=7):
    x = np.random.default_rng(n).standard_normal((n, 32)).astype(np.float32)
    y = np.full_like(x, np.nan)
    ring_where[(1,)](x, y, BUG=bug)
    return x, y


def test_ring_with_conditional_phases_is_correct_and_verifies_clean():
    x, y = _run("none")
    np.testing.assert_array_equal(y, x)
    report = tv.verify(ring_where)
    assert report.ok and not report.findings, str(report)


def test_late_wait_deadlocks_and_is_reported():
    with pytest.raises(InterpreterError, match="deadlock"):
        _run("late")
    fs = tv.verify(ring_where, BUG="late").findings
    dl = [f for f in fs if f.check == "deadlock"]
    assert dl and dl[0].counterexample and all(f.check == "deadlock" for f in fs), [f.check for f in fs]
