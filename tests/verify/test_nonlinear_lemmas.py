"""The lemmas global_race adds for products of two unknowns and divisions by a run-time divisor
(tilepy_verify/checks/tickets.py `nonlinear_lemmas`) are facts of every integer model: Hypothesis builds terms
of a tile scheduler's shape (b * total // G, ((i + 1) * G - 1) // total, (t // n) * n, x % y, sums of them)
and evaluates every lemma at random values, negative and zero included (where a divisor is 0 the encoder's
quotient is free: the lemmas are guarded by a nonzero or positive divisor, checked at quotient 0 there). And
the linear abstraction relaxes: where the query holds, its abstraction holds with each abstracted subterm at
its value."""

from hypothesis import given, settings
from hypothesis import strategies as st

from tilepy.symbolic import Var
from tilepy_verify.checks.tickets import nonlinear_lemmas
from tilepy_verify.vc import AND, cmp, evaluate_term

NAMES = ("b", "c", "G", "T", "i", "n")
LEAF = st.sampled_from([Var(n) for n in NAMES]) | st.integers(-3, 5)


def _div(op):
    def f(p):
        try:
            return p[0] // p[1] if op == "//" else p[0] % p[1]
        except ZeroDivisionError:  # a constant divisor 0 (folded): not a term
            return p[0]
    return f


def _terms(depth):
    if depth == 0:
        return LEAF
    sub = _terms(depth - 1)
    return st.one_of(
        LEAF,
        st.tuples(sub, sub).map(lambda p: p[0] + p[1]),
        st.tuples(sub, sub).map(lambda p: p[0] - p[1]),
        st.tuples(sub, sub).map(lambda p: p[0] * p[1]),
        st.tuples(sub, sub).map(_div("//")),
        st.tuples(sub, sub).map(_div("%")),
    )


SCHEDULER = [Var("b") * Var("T") // Var("G"), (Var("b") + 1) * Var("T") // Var("G"),
             ((Var("i") + 1) * Var("G") - 1) // Var("T"), (Var("i") // Var("n")) * Var("n"),
             Var("c") * Var("T") // Var("G"), (Var("c") + 1) * Var("T"), Var("i") % Var("n")]

ENV = st.fixed_dictionaries({n: st.integers(-20, 60) for n in NAMES})


@settings(max_examples=300, deadline=None)
@given(terms=st.lists(_terms(2), min_size=1, max_size=4), picks=st.lists(st.sampled_from(SCHEDULER), max_size=4),
       envs=st.lists(ENV, min_size=1, max_size=6))
def test_every_lemma_holds_at_every_value(terms, picks, envs):
    atoms = [cmp("<=", t, 0) for t in [*terms, *picks] if not isinstance(t, int)]
    lemmas = nonlinear_lemmas(AND(*atoms) if atoms else True, limit=None)
    for env in envs:
        for lemma in lemmas:
            assert evaluate_term(lemma, env), (lemma, env)


def test_the_scheduler_terms_give_lemmas():
    lemmas = nonlinear_lemmas(AND(*(cmp("<=", t, 0) for t in SCHEDULER)), limit=None)
    assert len(lemmas) > 20
