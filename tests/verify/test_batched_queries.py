"""The batched solver questions the checks ask over an mbarrier ring's stage copies (vc.Solver_.none_of,
Solver_.satisfiable) against brute force: random bool terms over two small integer variables (floor division
and modulo included, as the stage and phase terms are), whose models are enumerated directly."""

import itertools
import random

import pytest

from tilepy.symbolic import Var
from tilepy_verify.vc import AND, NOT, OR, Solver_, cmp, evaluate_term, in_range

X, Y = Var("x#0"), Var("y#0")
BOX = in_range(X, -6, 7), in_range(Y, -6, 7)


def _atom(rng):
    ops = ["<", "<=", "==", "!=", ">", ">="]
    exprs = [X, Y, X + Y, X - 2 * Y, X // 3, Y % 4, (X + 1) // 2 * 2 - Y, 3 * (X % 3) + Y // 2]
    return cmp(rng.choice(ops), rng.choice(exprs), rng.choice(exprs + [rng.randint(-5, 5)]))


def _term(rng, depth=2):
    if depth == 0 or rng.random() < 0.3:
        return _atom(rng)
    kids = [_term(rng, depth - 1) for _ in range(rng.randint(1, 3))]
    pick = rng.random()
    return AND(*kids) if pick < 0.45 else OR(*kids) if pick < 0.9 else NOT(kids[0])


def _brute(term) -> bool:
    full = AND(*BOX, term)
    return any(evaluate_term(full, {"x#0": x, "y#0": y}) for x, y in itertools.product(range(-6, 7), repeat=2))


@pytest.mark.parametrize("seed", range(12))
def test_batched_answers_match_brute_force(seed):
    rng = random.Random(seed)
    terms = [AND(*BOX, _term(rng)) for _ in range(rng.randint(1, 6))]
    if seed % 3 == 0:  # some batches with no model at all
        terms = [AND(t, cmp("<", X, -100)) for t in terms]
    want = [_brute(t) for t in terms]
    s = Solver_()
    try:
        assert s.none_of(terms) == (not any(want))
        assert s.satisfiable(terms) == want
    finally:
        s.close()


def test_one_query_for_a_batch_the_model_reaches():
    """Copies of one term shifted by a stage constant (as an unrolled ring's are): one model satisfies all."""
    s = Solver_()
    try:
        terms = [AND(*BOX, cmp("<", X * 4 + c, Y + 20)) for c in range(4)]
        assert s.satisfiable(terms) == [True] * 4
        assert s.queries == 1
    finally:
        s.close()
