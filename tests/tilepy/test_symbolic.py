"""Tests of tilepy.symbolic: folding, printing, structural equality and evaluation."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tilepy.symbolic import BinOp, Const, Var, as_sym, evaluate, free_vars

i, j = Var("i"), Var("j")


# --- folding -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr, expected",
    [
        (i * 1, i),
        (1 * i, i),
        (i + 0, i),
        (0 + i, i),
        (i - 0, i),
        (i * 0, Const(0)),
        (0 * i, Const(0)),
        (i // 1, i),
        (i % 1, Const(0)),
        (as_sym(2) + 3, Const(5)),
        (as_sym(17) // 5, Const(3)),
        (as_sym(17) % 5, Const(2)),
        (as_sym(6) ^ 3, Const(5)),
        (i ^ 0, i),
        (i & 0, Const(0)),
        (i | 0, i),
        (i >> 0, i),
        (i << 0, i),
        (0 // i, Const(0)),
        (i - i, Const(0)),
        (i ^ i, Const(0)),
        (i * 2 * 4, i * 8),  # constants merge down the chain
        (i + 1 + 2, i + 3),
        (i // 2 // 4, i // 8),  # floor(floor(i/2)/4) == floor(i/8)
        (i % 8 % 4, i % 4),  # 4 divides 8
        (i >> 1 >> 2, i >> 3),
        (3 * i, i * 3),  # constants are kept on the right
    ],
)
def test_folding(expr, expected):
    assert expr == expected


def test_no_unsound_mod_merge():
    # (i % 6) % 4 is not i % 4 (i = 6 gives 0 vs 2), so it must stay as it is.
    e = i % 6 % 4
    assert isinstance(e, BinOp) and e.op == "%" and e.a == i % 6


def test_division_by_nonpositive_constant_is_rejected():
    with pytest.raises(ZeroDivisionError):
        i // 0
    with pytest.raises(ZeroDivisionError):
        i % -2


def test_no_truth_value():
    # Layout evaluation must not branch on coordinates; a Sym makes any attempt fail loudly.
    with pytest.raises(TypeError):
        bool(i + 1)
    with pytest.raises(TypeError):
        min(i, j)


def test_numpy_array_does_not_absorb_sym():
    with pytest.raises(TypeError):
        np.arange(3) + i


def test_numpy_integer_scalars_are_constants():
    assert i * np.int64(4) == i * 4
    assert np.int32(2) + i == i + 2


# --- structure -----------------------------------------------------------------------------


def test_structural_equality_and_hash():
    a = (i % 4) * 2 + (j // 4)
    b = (Var("i") % 4) * 2 + (Var("j") // 4)
    assert a == b and hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a != (i % 4) * 2 + (i // 4)
    assert Var("i", bits=64) != Var("i")


def test_nodes_are_immutable():
    with pytest.raises(AttributeError):
        i.name = "k"


def test_free_vars():
    assert free_vars(i * 2 + j % 3 + 5) == {i, j}
    assert free_vars(as_sym(7)) == frozenset()
    wide = Var("k", bits=64)
    assert free_vars(wide >> 3) == {wide}


def test_printing():
    assert str((i % 4) * 2 + i // 4) == "i % 4 * 2 + i // 4"
    assert str((i + 1) * 2) == "(i + 1) * 2"
    assert str(i - (j - 1)) == "i - (j - 1)"
    assert str(i - j - 1) == "i - j - 1"
    assert str(i // (j * 2)) == "i // (j * 2)"
    # Under bitwise operators the grouping is always spelled out.
    assert str(i ^ ((i & 448) >> 3)) == "i ^ ((i & 448) >> 3)"
    assert str((i + j) & 7) == "(i + j) & 7"


# --- evaluation ----------------------------------------------------------------------------


def test_evaluate_examples():
    e = (i % 4) * 2 + i // 4  # i = 13: 1*2 + 3 = 5
    assert evaluate(e, {"i": 13}) == 5
    assert evaluate(i ^ ((i & 448) >> 3), {"i": 200}) == 208  # 200 ^ (192 >> 3) = 200 ^ 24
    assert evaluate(7, {}) == 7
    with pytest.raises(KeyError, match="'j'"):
        evaluate(i + j, {"i": 1})


def test_evaluate_vectorized_and_substitution():
    e = (i % 4) * 8 + (j >> 1)
    ii, jj = np.meshgrid(np.arange(8), np.arange(6), indexing="ij")
    got = evaluate(e, {"i": ii, "j": jj})
    assert np.array_equal(got, (ii % 4) * 8 + (jj >> 1))
    # A Sym as a value substitutes.
    assert evaluate(e, {"i": j * 2, "j": j}) == (j * 2 % 4) * 8 + (j >> 1)


# Random expression recipes: ("var", name) | ("const", c) | (op, lhs, rhs).  Divisors and shift
# counts are constants (positive / small), as in layout formulas.
_leaves = st.one_of(
    st.sampled_from(["i", "j", "k"]).map(lambda n: ("var", n)),
    st.integers(-3, 20).map(lambda c: ("const", c)),
)


def _extend(children):
    arith = st.tuples(st.sampled_from(["+", "-", "*", "^", "&", "|"]), children, children)
    division = st.tuples(
        st.sampled_from(["//", "%"]), children, st.integers(1, 9).map(lambda c: ("const", c))
    )
    shifts = st.tuples(st.sampled_from([">>", "<<"]), children, st.integers(0, 4).map(lambda c: ("const", c)))
    return st.one_of(arith, division, shifts)


recipes = st.recursive(_leaves, _extend, max_leaves=12)

_PY = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "//": lambda a, b: a // b,
    "%": lambda a, b: a % b,
    "^": lambda a, b: a ^ b,
    "&": lambda a, b: a & b,
    "|": lambda a, b: a | b,
    ">>": lambda a, b: a >> b,
    "<<": lambda a, b: a << b,
}


def build(recipe, leaf):
    kind = recipe[0]
    if kind == "var":
        return leaf(recipe[1])
    if kind == "const":
        return recipe[1]
    return _PY[kind](build(recipe[1], leaf), build(recipe[2], leaf))


@settings(max_examples=200, deadline=None)
@given(recipes, st.fixed_dictionaries({n: st.integers(-50, 300) for n in "ijk"}))
def test_folding_is_sound(recipe, env):
    # Building with Vars (which folds) then evaluating must equal computing on ints directly.
    expr = build(recipe, Var)
    assert evaluate(expr, env) == build(recipe, env.__getitem__)


@settings(max_examples=100, deadline=None)
@given(recipes)
def test_str_is_valid_python(recipe):
    expr = build(recipe, Var)
    env = {"i": 37, "j": 5, "k": 250}
    assert eval(str(expr), {}, dict(env)) == evaluate(expr, env)


@settings(max_examples=100, deadline=None)
@given(recipes)
def test_vectorized_matches_scalar(recipe):
    expr = build(recipe, Var)
    i_vals, j_vals = np.arange(0, 40, dtype=np.int64), np.arange(40, 0, -1, dtype=np.int64)
    scalar_envs = [{"i": int(a), "j": int(b), "k": 7} for a, b in zip(i_vals, j_vals, strict=True)]
    # int64 wraps where Python ints do not: keep to recipes whose every intermediate value fits.
    assume(all(_fits_int64(recipe, env) for env in scalar_envs))
    got = np.broadcast_to(evaluate(expr, {"i": i_vals, "j": j_vals, "k": 7}), (40,))
    assert got.tolist() == [evaluate(expr, env) for env in scalar_envs]


def _subrecipes(recipe):
    yield recipe
    if recipe[0] not in ("var", "const"):
        yield from _subrecipes(recipe[1])
        yield from _subrecipes(recipe[2])


def _fits_int64(recipe, env) -> bool:
    return all(abs(build(r, env.__getitem__)) < 2**62 for r in _subrecipes(recipe))
