"""SharedType.offset is the one definition of where a shared element lives (interpreter, verifier and renderers
all use it): checked against offsets written out by hand, in each of its arithmetics (ints, numpy arrays,
symbolic expressions and the C++ text the renderers print from them)."""

import numpy as np
import pytest

from tilepy import dtypes as dt
from tilepy.layout import Layout, Swizzle, col_major, row_major
from tilepy.symbolic import Var
from tilepy.types import SharedType
from tilepy_hip.render.cexpr import sym_c


def swizzle_ref(x, bits, base, shift):
    # CuTe's Swizzle<B, M, S> written the other way round: take the B bits at M + S down to M, xor them in.
    return x ^ ((x >> shift) & (((1 << bits) - 1) << base))


# (type, reference offset of (r, c) written out by hand)
CASES = {
    "row_major": (SharedType(dt.f32, (8, 12), row_major((8, 12))), lambda r, c: r * 12 + c),
    "col_major": (SharedType(dt.f32, (8, 12), col_major((8, 12))), lambda r, c: r + c * 8),
    "padded": (SharedType(dt.f32, (8, 12), Layout((8, 12), (13, 1))), lambda r, c: r * 13 + c),
    "swizzled_128B": (SharedType(dt.bf16, (16, 64), row_major((16, 64)), Swizzle(3, 3, 3)),
                      lambda r, c: swizzle_ref(r * 64 + c, 3, 3, 3)),
    "swizzled_64B": (SharedType(dt.bf16, (16, 32), row_major((16, 32)), Swizzle(2, 3, 3)),
                     lambda r, c: swizzle_ref(r * 32 + c, 2, 3, 3)),
    # (BK, (atom, BN // atom)) column blocks, as gemm_hopper stores an MN-major B
    "column_blocks": (SharedType(dt.bf16, (16, 128), Layout((16, (64, 2)), (64, (1, 1024))), Swizzle(3, 3, 3)),
                      lambda r, c: swizzle_ref(r * 64 + c % 64 + (c // 64) * 1024, 3, 3, 3)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_offsets_in_every_arithmetic_match_the_hand_written_formula(name):
    st, ref = CASES[name]
    R, C = st.shape
    rr, cc = np.meshgrid(np.arange(R), np.arange(C), indexing="ij")
    want = ref(rr, cc)
    # numpy: elementwise, int64, the coordinates' broadcast shape
    got = st.offset((np.arange(R)[:, None], np.arange(C)[None, :]))
    assert got.dtype == np.int64 and got.shape == (R, C)
    np.testing.assert_array_equal(got, want)
    # ints, one element at a time
    for r, c in [(0, 0), (1, 2), (R - 1, C - 1), (R // 2, C - 3)]:
        assert st.offset((r, c)) == want[r, c]
        assert isinstance(st.offset([r, c]), int)
    # a symbolic formula, evaluated on every coordinate
    sym = st.offset((Var("r"), Var("c")))
    np.testing.assert_array_equal(eval(str(sym), {"r": rr, "c": cc}), want)
    # the C++ the renderers print from it (coordinates are never negative: C's / is Python's //)
    text = sym_c(sym)
    np.testing.assert_array_equal(eval(text.replace("/", "//"), {"r": rr, "c": cc}), want)
    # every element of a stage has its own offset, inside the stage
    assert len(np.unique(want)) == R * C and want.max() < st.stage_elems


def test_offset_layout_is_the_layout_then_the_swizzle():
    st, _ = CASES["swizzled_128B"]
    L = st.offset_layout
    assert L.inner == st.layout and L.outer == st.swizzle
    assert CASES["row_major"][0].offset_layout == CASES["row_major"][0].layout


def test_a_one_dimensional_tile_takes_one_coordinate():
    st = SharedType(dt.f32, (32,), row_major((32,)), Swizzle(1, 2, 3))
    np.testing.assert_array_equal(st.offset((np.arange(32),)), swizzle_ref(np.arange(32), 1, 2, 3))


def test_windows_and_permutes_keep_every_element_in_place():
    st, ref = CASES["padded"]
    w, origin = st.window((2, 4), (4, 6), (False, False))
    rr, cc = np.meshgrid(np.arange(4), np.arange(6), indexing="ij")
    np.testing.assert_array_equal(origin + w.offset((rr, cc)), ref(rr + 2, cc + 4))
    p = st.permute((1, 0))
    np.testing.assert_array_equal(p.offset((cc, rr)), st.offset((rr, cc)))


def test_coordinates_that_do_not_match_the_layout_are_refused():
    st, _ = CASES["row_major"]
    with pytest.raises(ValueError, match="2 modes but the tile has 3 dimensions"):
        st.offset((0, 0, 0))
