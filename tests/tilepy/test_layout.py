"""Tests of tilepy.layout (and tilepy.int_tuple): worked examples, then algebraic properties."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tilepy.int_tuple import (
    LayoutError,
    crd2idx,
    flatten,
    idx2crd,
    prefix_product,
    product,
    shape_div,
    suffix_product,
)
from tilepy.layout import (
    ComposedLayout,
    Layout,
    Swizzle,
    blocked_product,
    coalesce,
    col_major,
    complement,
    composition,
    filter,
    left_inverse,
    logical_divide,
    logical_product,
    make_layout,
    raked_product,
    right_inverse,
    row_major,
    size,
    tiled_divide,
    zipped_divide,
)
from tilepy.symbolic import Var, evaluate, free_vars

FAST = settings(max_examples=100, deadline=None)


def offsets(layout, n=None) -> list[int]:
    """``[layout(i) for i in range(n)]``, computed elementwise on an index array (vectorized
    evaluation is checked against scalar calls below).  ``layout`` may be any function of an index."""
    idx = np.arange(size(layout) if n is None else n, dtype=np.int64)
    return np.broadcast_to(layout(idx), idx.shape).tolist()


def scalar_offsets(layout) -> list[int]:
    return [layout(i) for i in range(size(layout))]


# --- int tuples --------------------------------------------------------------------------------


def test_int_tuple_basics():
    assert flatten(((2, 3), 4)) == (2, 3, 4)
    assert product(((2, 3), 4)) == 24
    assert prefix_product((2, (3, 4))) == (1, (2, 6))  # 1, then 2, then 2*3
    assert suffix_product((2, (3, 4))) == (12, (4, 1))  # 3*4, 4, 1
    assert shape_div((4, 6), 8) == (1, 3)  # 8 swallows the 4 (-> 1), then 8/4 = 2 halves the 6
    assert shape_div(2, 4) == 1
    with pytest.raises(LayoutError):
        shape_div(6, 4)
    assert idx2crd(5, (2, 3)) == (1, 2)  # 5 = 1 + 2*2
    assert crd2idx((1, 2), (2, 3)) == 5
    assert crd2idx(5, (2, 3), (3, 1)) == 1 * 3 + 2 * 1
    assert idx2crd(7, ((2, 2), 2)) == ((1, 1), 1)


# --- worked examples ---------------------------------------------------------------------------


def test_layout_evaluation_by_hand():
    col = Layout((4, 2), (1, 4))  # i -> i%4 + (i//4)*4: the identity on 0..7
    assert offsets(col) == list(range(8))
    row = Layout((4, 2), (2, 1))  # i -> (i%4)*2 + i//4
    assert offsets(row) == [0, 2, 4, 6, 1, 3, 5, 7]
    assert row(1, 1) == 1 * 2 + 1 * 1 == row((1, 1))
    assert row(3, 0) == 6
    nested = Layout(((2, 2), 2), ((4, 1), 2))  # i -> (i%2)*4 + ((i//2)%2)*1 + (i//4)*2
    assert offsets(nested) == [0, 4, 1, 5, 2, 6, 3, 7]
    assert nested((1, 0), 1) == 4 + 2
    assert Layout((2, (3, 4))).stride == (1, (2, 6))
    assert row_major((4, 2)) == row and col_major((4, 2)) == col


def test_layout_properties_and_printing():
    L = Layout(((2, 2), 8), ((1, 16), 2))
    assert L.size() == 32 and L.rank() == 2 and L.depth() == 2
    assert L.cosize() == 1 + 1 * 1 + 1 * 16 + 7 * 2  # largest offset 31, plus one
    assert L[0] == Layout((2, 2), (1, 16)) and L[1] == Layout(8, 2)
    assert repr(L) == "((2,2),8):((1,16),2)"
    assert repr(Layout(4, 2)) == "4:2"
    assert make_layout(Layout(4, 1), Layout(2, 4)) == Layout((4, 2), (1, 4))
    with pytest.raises(LayoutError):
        Layout((4, 2), (1,))
    with pytest.raises(LayoutError):
        Layout(4, -1)


def test_coalesce_by_hand():
    assert coalesce(Layout((2, (1, 6)), (1, (6, 2)))) == Layout(12, 1)  # 1-mode dropped; 2*1 == 2 merges
    assert coalesce(Layout((4, 3), (3, 12))) == Layout(12, 3)
    assert coalesce(Layout((4, 3), (1, 8))) == Layout((4, 3), (1, 8))  # 4*1 != 8: a gap, no merge
    assert coalesce(Layout((2, 1), (5, 9))) == Layout(2, 5)
    assert coalesce(Layout((1, 1), (5, 9))) == Layout(1, 0)
    # With a profile each mode coalesces on its own and the rank stays.
    assert coalesce(Layout(((2, 2), (2, 2)), ((1, 2), (4, 8))), (1, 1)) == Layout((4, 4), (1, 4))
    assert filter(Layout((4, 3), (0, 2))) == Layout(3, 2)


def test_composition_by_hand():
    # A = (6,2):(8,2), B = (4,3):(3,1).
    # Mode 0 of B, 4:3: 3 steps of A's first mode (extent 6) fit 6/3 = 2 times -> 2:(3*8 = 24);
    #   the remaining 4/2 = 2 steps move 3/6 -> 1 step of A's last mode -> 2:(1*2 = 2).
    # Mode 1 of B, 3:1: 3 unit steps stay inside A's first mode -> 3:8.
    A, B = Layout((6, 2), (8, 2)), Layout((4, 3), (3, 1))
    R = composition(A, B)
    assert R == Layout(((2, 2), 3), ((24, 2), 8))
    # Spot check: B(1, 0) = 3 -> A(3) = 3*8 = 24; B(2, 0) = 6 -> A(6) = 0*8 + 1*2 = 2.
    assert R(1) == 24 and R(2) == 2
    assert composition(Layout(20, 2), Layout((4, 5), (1, 4))) == Layout((4, 5), (2, 8))
    assert composition(Layout((4, 3)), Layout(6, 1)) == Layout(6, 1)  # A coalesces to 12:1
    # 4 unit steps, or 2 steps of 2, stay inside the first mode even though 4, 2 do not divide 6, 3.
    assert composition(Layout((6, 4), (1, 10)), 4) == Layout(4, 1)
    assert composition(Layout((3, 4), (1, 10)), Layout(2, 2)) == Layout(2, 2)
    with pytest.raises(LayoutError):
        composition(Layout((4, 3), (1, 5)), Layout(6, 1))  # 6 steps straddle the 4-mode unevenly
    with pytest.raises(LayoutError):
        composition(Layout((3, 4), (1, 10)), Layout(3, 2))  # steps of 2 in a mode of 3: 0, 2, then 4 = 1+3
    # B = (2,2):(1,1) sums to 2 at (1,1), which carries out of A's first mode (A(2) = 1, but
    # A(1) + A(1) = 0): no layout by mode can represent it.
    with pytest.raises(LayoutError, match="carry"):
        composition(Layout((2, 2), (0, 1)), Layout((2, 2), (1, 1)))
    # The same B is fine where the first mode has room: A(1) + A(1) = A(2) = 2 when A = 4:1.
    assert composition(Layout((4, 2), (1, 7)), Layout((2, 2), (1, 1))) == Layout((2, 2), (1, 1))


def test_complement_by_hand():
    # 4:2 covers {0,2,4,6}; the hole at stride 1 gives 2:1, and repeating the 8-span to reach 24 gives 3:8.
    assert complement(Layout(4, 2), 24) == Layout((2, 3), (1, 8))
    # (2,2):(1,6) covers {0,1,6,7}: holes 3:2 fill {0..11}, then 2:12 doubles it to 24.
    C = complement(Layout((2, 2), (1, 6)), 24)
    assert C == Layout((3, 2), (2, 12))
    assert sorted(a + c for a in offsets(Layout((2, 2), (1, 6))) for c in offsets(C)) == list(range(24))
    assert complement(Layout(4, 1), 4) == Layout(1, 0)  # nothing left to cover
    assert complement(Layout((4, 3), (0, 1)), 6) == Layout(2, 3)  # broadcast modes take no room
    with pytest.raises(LayoutError):
        complement(Layout((2, 2), (1, 1)), 4)  # overlapping modes have no complement


def test_inverses_by_hand():
    A = Layout((4, 2), (2, 1))
    # Offsets 0,1,... are reached at indices 0,4,1,5,...: index stride 4 for offset bit 0, 1 for the rest.
    assert right_inverse(A) == Layout((2, 4), (4, 1))
    assert [A(right_inverse(A)(i)) for i in range(8)] == list(range(8))
    assert left_inverse(Layout(4, 2)) == Layout((2, 4), (4, 1))  # offset 2k -> k
    assert right_inverse(Layout(4, 2)) == Layout(1, 0)  # offset 1 is never produced


def test_divide_by_hand():
    # complement(4:2, 24) = (2,3):(1,8), so the tile 4:2 is followed by (2,3):(1,8).
    assert logical_divide(Layout(24), Layout(4, 2)) == Layout((4, (2, 3)), (2, (1, 8)))
    A = Layout((8, 6))  # (8,6):(1,8)
    # By mode: 8:1 / 2 -> (2,4):(1,2); 6:8 / 3 -> (3,2):(8,24).
    assert logical_divide(A, (2, 3)) == Layout(((2, 4), (3, 2)), ((1, 2), (8, 24)))
    assert zipped_divide(A, (2, 3)) == Layout(((2, 3), (4, 2)), ((1, 8), (2, 24)))
    assert tiled_divide(A, (2, 3)) == Layout(((2, 3), 4, 2), ((1, 8), 2, 24))


def test_product_by_hand():
    # A = (2,2):(4,1) has cosize 6; complement(A, 4*6) = (2,3):(2,8); composed with 6:1 it stays.
    A = Layout((2, 2), (4, 1))
    assert logical_product(A, Layout(6)) == Layout(((2, 2), (2, 3)), ((4, 1), (2, 8)))
    assert logical_product(Layout(2), Layout(3)) == Layout((2, 3), (1, 2))
    # 2x2 column-major blocks arranged 2x3: complement(A, 4*6) = 6:4, so blocks sit at 4*(b0 + 2*b1).
    assert blocked_product(Layout((2, 2)), Layout((2, 3))) == Layout(((2, 2), (2, 3)), ((1, 4), (2, 8)))
    assert raked_product(Layout((2, 2)), Layout((2, 3))) == Layout(((2, 2), (3, 2)), ((4, 1), (8, 2)))


def test_swizzle_by_hand():
    sw = Swizzle(3, 3, 3)  # xor bits 6..8 into bits 3..5
    assert sw(7) == 7  # no bit at 6..8
    assert sw(64) == 64 ^ 8  # bit 6 -> bit 3
    assert sw(200) == 208  # 0b011_001_000: 0b011 ^ 0b001 = 0b010 -> 0b011_010_000
    assert sw(455) == 511  # 0b111_000_111 -> 0b111_111_111
    assert sw.size() == 512
    assert Swizzle(2, 0, -3)(0b00011) == 0b11011  # negative shift: low bits 0..1 into bits 3..4
    with pytest.raises(LayoutError):
        Swizzle(3, 0, 2)  # masks would overlap
    smem = composition(sw, row_major((8, 64)))
    assert isinstance(smem, ComposedLayout)
    assert smem(1, 8) == (64 + 8) ^ 8  # row 1 starts at 64: bit 6 flips column bit 3


def test_symbolic_offsets_by_hand():
    e = Layout((4, 2), (2, 1)).to_symbolic("i")
    assert str(e) == "i % 4 * 2 + i // 4"
    assert str(row_major((8, 64)).to_symbolic(("r", "c"))) == "r * 64 + c"
    assert free_vars(e) == {Var("i")}
    swizzled = ComposedLayout(Swizzle(3, 3, 3), row_major((8, 64))).to_symbolic(("r", "c"))
    assert evaluate(swizzled, {"r": 3, "c": 8}) == (3 * 64 + 8) ^ (((3 * 64 + 8) & 448) >> 3)


# --- strategies ----------------------------------------------------------------------------------


@st.composite
def extents(draw, choices=(1, 2, 3, 4, 5, 6, 8), max_size=256, max_modes=4):
    """A flat list of mode extents with product <= max_size."""
    out, budget = [], max_size
    for _ in range(draw(st.integers(1, max_modes))):
        fitting = [c for c in choices if c <= budget]
        s = draw(st.sampled_from(fitting))
        out.append(s)
        budget //= s
    return out


@st.composite
def nesting(draw, n, max_depth=2):
    """A random nested-tuple profile over n leaves, as a function from a flat list to a nested value."""
    if n == 1 and draw(st.booleans()):
        return lambda vals: vals[0]
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=n - 1))) if n > 1 else []
    bounds = list(zip([0, *cuts], [*cuts, n], strict=True))
    parts = []
    for lo, hi in bounds:
        if hi - lo == 1:
            parts.append(lambda vals, lo=lo: vals[lo])
        elif max_depth <= 1:
            parts.append(lambda vals, lo=lo, hi=hi: tuple(vals[lo:hi]))
        else:
            sub = draw(nesting(hi - lo, max_depth - 1))
            parts.append(lambda vals, lo=lo, hi=hi, sub=sub: sub(vals[lo:hi]))
    return lambda vals: tuple(p(vals) for p in parts)


@st.composite
def layouts(draw, choices=(1, 2, 3, 4, 5, 6, 8), strides=st.integers(0, 40), max_size=256):
    shape = draw(extents(choices, max_size))
    stride = [draw(strides) for _ in shape]
    nest = draw(nesting(len(shape)))
    return Layout(nest(shape), nest(stride))


POW2 = (1, 2, 4, 8)
pow2_strides = st.sampled_from([0, 1, 2, 4, 8, 16, 32])


@st.composite
def injective_layouts(draw, choices=(1, 2, 3, 4, 5, 6, 8), gaps=(1, 1, 2, 3), max_size=128):
    """Complementable, injective layouts: modes laid out in increasing stride with optional holes,
    then shuffled and nested."""
    shape = draw(extents(choices, max_size))
    modes, covered = [], 1
    for s in shape:
        d = covered * draw(st.sampled_from(gaps))
        modes.append((s, d))
        covered = s * d
    modes = draw(st.permutations(modes))
    nest = draw(nesting(len(modes)))
    return Layout(nest([s for s, _ in modes]), nest([d for _, d in modes]))


def span(layout) -> int:
    """The extent of the non-trivial modes: what complement() has to tile."""
    modes = zip(flatten(layout.shape), flatten(layout.stride), strict=True)
    return max([s * d for s, d in modes if s > 1 and d > 0], default=1)


# --- properties ----------------------------------------------------------------------------------


@FAST
@given(layouts())
def test_vectorized_and_symbolic_evaluation_match_scalar(L):
    idx = np.arange(L.size(), dtype=np.int64)
    scalar = scalar_offsets(L)
    assert L(idx).tolist() == scalar
    # A coordinate tuple of arrays works elementwise too.
    assert np.broadcast_to(L(idx2crd(idx, L.shape)), idx.shape).tolist() == scalar
    # And the symbolic formula evaluates to the same numbers.
    expr = L.to_symbolic("i")
    assert np.broadcast_to(evaluate(expr, {"i": idx}), idx.shape).tolist() == scalar
    assert [evaluate(expr, {"i": i}) for i in range(L.size())] == scalar


@FAST
@given(layouts())
def test_symbolic_coordinates(L):
    names = tuple(f"m{k}" for k in range(L.rank()))
    expr = L.to_symbolic(names if L.rank() > 1 else names[0])
    for i in range(0, L.size(), 5):
        crd = idx2crd(i, tuple(product(m.shape) for m in L)) if L.rank() > 1 else i
        env = dict(zip(names, crd if L.rank() > 1 else (crd,), strict=True))
        assert evaluate(expr, env) == L(i)


@FAST
@given(layouts())
def test_coalesce_preserves_the_function(L):
    C = coalesce(L)
    assert C.size() == L.size()
    assert C.depth() <= 1
    assert offsets(C) == offsets(L)
    by_mode = coalesce(L, (1,) * L.rank())
    assert by_mode.rank() == L.rank() and offsets(by_mode) == offsets(L)


@FAST
@given(layouts(choices=POW2, strides=pow2_strides), st.data())
def test_composition_pointwise_pow2(A, data):
    # With powers of two every divisibility condition holds, and an injective B's modes occupy
    # disjoint bits, so they cannot carry: composition always exists.
    B = data.draw(injective_layouts(choices=POW2, gaps=(1, 1, 2, 4), max_size=A.size()))
    assume(B.cosize() <= A.size())
    R = composition(A, B)
    assert R.size() == B.size()
    assert offsets(R) == offsets(lambda i: A(B(i)), B.size())


@FAST
@given(layouts(), layouts(max_size=64, strides=st.integers(0, 12)))
def test_composition_pointwise_when_defined(A, B):
    assume(B.cosize() <= A.size())
    try:
        R = composition(A, B)
    except LayoutError:
        return  # e.g. shapes that do not divide: no layout represents A o B
    assert offsets(R) == offsets(lambda i: A(B(i)), B.size())


@FAST
@given(injective_layouts(), st.integers(1, 4), st.integers(1, 300))
def test_complement_is_disjoint_and_completes(A, k, M):
    # A cotarget that is a multiple of the span: (A, complement) is a bijection onto range(M).
    full = make_layout(A, complement(A, span(A) * k))
    assert sorted(offsets(full)) == list(range(span(A) * k))
    # Any cotarget: still injective, and it covers range(M) (rounded up to whole spans).
    full = make_layout(A, complement(A, M))
    image = offsets(full)
    assert len(set(image)) == len(image)
    assert sorted(image) == list(range(-(-M // span(A)) * span(A)))


@FAST
@given(layouts())
def test_right_inverse(A):
    R = right_inverse(A)
    assert [A(R(i)) for i in range(R.size())] == list(range(R.size()))


@FAST
@given(injective_layouts(gaps=(1,)))
def test_right_inverse_of_a_permutation_is_total(A):
    R = right_inverse(A)
    assert R.size() == A.size()
    assert [R(A(i)) for i in range(A.size())] == list(range(A.size()))


@FAST
@given(injective_layouts())
def test_left_inverse(A):
    L = left_inverse(A)
    assert [L(A(i)) for i in range(A.size())] == list(range(A.size()))


@st.composite
def pow2_layouts_of_size(draw, n: int):
    """Layouts with power-of-two extents and strides and size exactly n (a power of two)."""
    bits = n.bit_length() - 1
    cuts = sorted(draw(st.lists(st.integers(0, bits), max_size=3)))
    shape = [1 << (hi - lo) for lo, hi in zip([0, *cuts], [*cuts, bits], strict=True)]
    stride = [draw(pow2_strides) for _ in shape]
    nest = draw(nesting(len(shape)))
    return Layout(nest(shape), nest(stride))


@FAST
@given(injective_layouts(choices=POW2, gaps=(1, 1, 2, 4), max_size=64), st.integers(0, 2), st.data())
def test_logical_divide_identities(B, k, data):
    A = data.draw(pow2_layouts_of_size(span(B) << k))  # the tiler's span divides size(A)
    D = logical_divide(A, B)
    assert D == composition(A, make_layout(B, complement(B, A.size())))
    assert D.size() == A.size()
    assert offsets(D) == offsets(lambda i: A(make_layout(B, complement(B, A.size()))(i)), A.size())
    Z = zipped_divide(A, B)
    assert offsets(Z[0]) == offsets(lambda j: A(B(j)), B.size())  # mode 0 is one tile
    assert offsets(Z) == offsets(D)


@FAST
@given(st.integers(1, 16), st.integers(1, 16), st.data())
def test_tiling_a_matrix_by_mode(M, N, data):
    A = Layout((M, N), (data.draw(st.integers(0, 20)), data.draw(st.integers(0, 40))))
    m = data.draw(st.sampled_from([d for d in range(1, M + 1) if M % d == 0]))
    n = data.draw(st.sampled_from([d for d in range(1, N + 1) if N % d == 0]))
    Z = zipped_divide(A, (m, n))
    T = tiled_divide(A, (m, n))
    assert Z.size() == A.size() and Z[0].size() == m * n
    for i, j, p, q in [(0, 0, 0, 0), (m - 1, n - 1, M // m - 1, N // n - 1), (m // 2, n - 1, M // m // 2, 0)]:
        # Element (i, j) of tile (p, q) is element (p*m + i, q*n + j) of A.
        assert Z((i, j), (p, q)) == A(p * m + i, q * n + j) == T((i, j), p, q)


@FAST
@given(
    injective_layouts(choices=POW2, gaps=(1, 1, 2), max_size=32),
    injective_layouts(choices=POW2, gaps=(1, 1, 2), max_size=16),
)
def test_logical_product(A, B):
    P = logical_product(A, B)
    C = complement(A, A.size() * B.cosize())
    assert P.size() == A.size() * B.size()
    assert P[0] == A
    assert [P(i, j) for j in range(B.size()) for i in range(A.size())] == [
        A(i) + C(B(j)) for j in range(B.size()) for i in range(A.size())
    ]
    image = offsets(P)
    assert len(set(image)) == len(image)  # copies of A never overlap


@FAST
@given(
    injective_layouts(choices=POW2, gaps=(1,), max_size=32),
    injective_layouts(choices=POW2, gaps=(1,), max_size=16),
)
def test_product_of_compact_layouts_is_compact(A, B):
    assert sorted(offsets(logical_product(A, B))) == list(range(A.size() * B.size()))
    assert sorted(offsets(blocked_product(A, B))) == list(range(A.size() * B.size()))


# Swizzle(bits, base, shift) with |shift| >= bits, either sign.
swizzles = st.integers(0, 3).flatmap(
    lambda b: st.builds(
        Swizzle,
        st.just(b),
        st.integers(0, 3),
        st.integers(b, b + 3).flatmap(lambda s: st.sampled_from([s, -s])),
    )
)


@FAST
@given(swizzles)
def test_swizzle_is_an_involutive_bijection(sw):
    x = np.arange(sw.size(), dtype=np.int64)
    y = sw(x)
    assert sorted(y.tolist()) == x.tolist()
    assert sw(y).tolist() == x.tolist()
    assert y.tolist() == [sw(int(v)) for v in x]  # vectorized == scalar
    assert [evaluate(sw(Var("o")), {"o": int(v)}) for v in x[::5]] == y[::5].tolist()


@FAST
@given(swizzles, layouts(), st.data())
def test_swizzled_layouts_generic_evaluation(sw, L, data):
    S = ComposedLayout(sw, L)
    idx = np.arange(L.size(), dtype=np.int64)
    scalar = [sw(L(i)) for i in range(L.size())]
    assert [S(i) for i in range(L.size())] == scalar
    assert np.broadcast_to(S(idx), idx.shape).tolist() == scalar
    assert np.broadcast_to(evaluate(S.to_symbolic("i"), {"i": idx}), idx.shape).tolist() == scalar
    # Composing a swizzled layout with a tiler keeps the swizzle outside.
    try:
        T = composition(S, Layout(L.size() // 2, 2))
    except LayoutError:
        return
    assert isinstance(T, ComposedLayout) and T.outer == sw
    assert offsets(T) == offsets(lambda i: S(2 * i), L.size() // 2)
