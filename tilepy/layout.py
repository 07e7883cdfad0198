"""CuTe-style layout algebra: layouts map (nested) coordinates to integer offsets.

A ``Layout(shape, stride)`` is the function ``crd -> sum(crd_i * stride_i)`` over the coordinates
of ``shape``; an integer index is first turned into a coordinate colexicographically (leftmost
mode fastest).  ``(4,2):(1,4)`` is a column-major 4x2 matrix, ``(4,2):(2,1)`` a row-major one.

Evaluation is generic over the coordinate type: ``layout(i)`` works for a Python int, elementwise
for numpy integer arrays (``layout(np.arange(layout.size()))`` lists every offset), and for
``tilepy.symbolic.Sym`` (giving the offset formula).  Evaluation therefore only applies
``+ * // % ^ & >>`` to coordinates and never branches on them.  The algebra (composition,
complement, divide, product) runs on static integer shapes and strides.

Strides are non-negative: offsets then stay non-negative, which the verifier's unsigned
bit-vector encoding relies on.
"""

from __future__ import annotations

import numpy as np

from tilepy.int_tuple import (
    LayoutError,
    as_int_tuple,
    congruent,
    crd2idx,
    depth,
    flatten,
    is_int,
    is_tuple,
    prefix_product,
    product,
    suffix_product,
)
from tilepy.symbolic import Sym, Var, as_sym

__all__ = [
    "ComposedLayout",
    "Layout",
    "LayoutError",
    "Swizzle",
    "blocked_product",
    "coalesce",
    "col_major",
    "complement",
    "composition",
    "cosize",
    "filter",
    "left_inverse",
    "logical_divide",
    "logical_product",
    "make_layout",
    "raked_product",
    "right_inverse",
    "row_major",
    "size",
    "tiled_divide",
    "zipped_divide",
]


def _fmt(t) -> str:
    # CuTe's spelling: no spaces, and a 1-tuple prints as "(4)".
    if is_tuple(t):
        return "(" + ",".join(_fmt(e) for e in t) + ")"
    return str(t)


class Layout:
    """``Layout(shape, stride=None)``: a map from coordinates of ``shape`` to offsets.

    ``stride`` defaults to the compact column-major strides (``prefix_product(shape)``).

    >>> L = Layout((4, 2), (2, 1))
    >>> [L(i) for i in range(8)]
    [0, 2, 4, 6, 1, 3, 5, 7]
    >>> L(1, 1), L((3, 0))
    (3, 6)
    """

    __slots__ = ("shape", "stride")

    def __init__(self, shape, stride=None):
        shape = as_int_tuple(shape)
        stride = prefix_product(shape) if stride is None else as_int_tuple(stride)
        if not congruent(shape, stride):
            raise LayoutError(f"shape {_fmt(shape)} and stride {_fmt(stride)} are not congruent")
        if any(s < 1 for s in flatten(shape)):
            raise LayoutError(f"shape {_fmt(shape)} has a non-positive extent")
        if any(d < 0 for d in flatten(stride)):
            raise LayoutError(f"stride {_fmt(stride)} is negative; only non-negative strides are supported")
        self.shape = shape
        self.stride = stride

    # -- static properties ------------------------------------------------------------------
    def size(self) -> int:
        """Number of coordinates: the product of the shape."""
        return product(self.shape)

    def cosize(self) -> int:
        """One past the largest offset, i.e. the extent of memory the layout touches."""
        return 1 + sum((s - 1) * d for s, d in zip(flatten(self.shape), flatten(self.stride), strict=True))

    def rank(self) -> int:
        """Number of top-level modes (an int shape counts as one mode)."""
        return len(self.shape) if is_tuple(self.shape) else 1

    def depth(self) -> int:
        return depth(self.shape)

    def __len__(self) -> int:
        return self.rank()

    def __getitem__(self, i):
        """Mode ``i`` as a layout (``i`` may be a slice).  An int-shaped layout is its own mode 0."""
        if is_tuple(self.shape):
            return Layout(self.shape[i], self.stride[i])
        if i in (0, -1):
            return self
        raise IndexError(f"layout {self} has a single mode")

    def __iter__(self):
        return (self[i] for i in range(self.rank()))

    # -- evaluation (generic over the coordinate type) --------------------------------------
    def __call__(self, *coord):
        """Offset of a linear index or a (nested) coordinate: ``L(5)``, ``L(1, 2)``, ``L((1, 2))``.

        Works on ints, elementwise on numpy integer arrays, and on ``Sym`` expressions.
        """
        if len(coord) == 1:
            coord = coord[0]
        return crd2idx(coord, self.shape, self.stride)

    def to_symbolic(self, coord="i"):
        """The offset formula as a ``Sym``.

        ``coord`` is a ``Sym``, a variable name, or a (nested) tuple of names/Syms matching the shape.

        >>> print(Layout((4, 2), (2, 1)).to_symbolic("i"))
        i % 4 * 2 + i // 4
        """
        return as_sym(self(_as_symbolic_coord(coord)))

    # -- identity ---------------------------------------------------------------------------
    def __eq__(self, other):
        return isinstance(other, Layout) and self.shape == other.shape and self.stride == other.stride

    def __hash__(self):
        return hash((self.shape, self.stride))

    def __repr__(self):
        return f"{_fmt(self.shape)}:{_fmt(self.stride)}"


def _as_symbolic_coord(coord):
    if isinstance(coord, Sym):
        return coord
    if isinstance(coord, str):
        return Var(coord)
    if isinstance(coord, (tuple, list)):
        return tuple(_as_symbolic_coord(c) for c in coord)
    raise TypeError(f"expected a Sym, a variable name or a tuple of them, got {coord!r}")


def _as_layout(x) -> Layout:
    if isinstance(x, Layout):
        return x
    if is_int(x) or is_tuple(x):
        return Layout(x)
    raise TypeError(f"expected a Layout or a shape, got {type(x).__name__} {x!r}")


def size(x) -> int:
    """Size of a layout, swizzle, composed layout or shape: ``size((2, (3, 4))) == 24``."""
    if isinstance(x, (Layout, ComposedLayout, Swizzle)):
        return x.size()
    return product(x)


def cosize(x) -> int:
    """Cosize of a layout (one past its largest offset)."""
    return x.cosize()


def make_layout(*layouts) -> Layout:
    """Concatenate layouts, each becoming one mode: ``make_layout(4:1, 2:4) == (4,2):(1,4)``.

    Ints and shapes are read as compact layouts.  A single list argument is taken as the sequence.
    """
    if len(layouts) == 1 and isinstance(layouts[0], list):
        layouts = tuple(layouts[0])
    layouts = [_as_layout(L) for L in layouts]
    return Layout(tuple(L.shape for L in layouts), tuple(L.stride for L in layouts))


def row_major(shape) -> Layout:
    """Compact layout whose rightmost mode is fastest: ``row_major((4, 2)) == (4,2):(2,1)``."""
    shape = as_int_tuple(shape)
    return Layout(shape, suffix_product(shape))


def col_major(shape) -> Layout:
    """Compact layout whose leftmost mode is fastest: ``col_major((4, 2)) == (4,2):(1,4)``."""
    return Layout(shape)


def _by_mode(layout: Layout, tiler: tuple, op) -> Layout:
    """Apply ``op(mode_i, tiler[i])`` to the leading modes of ``layout``; later modes stay as they are."""
    if len(tiler) > layout.rank():
        raise LayoutError(f"tiler {tiler} has more modes than layout {layout}")
    modes = list(layout)
    return make_layout(*[op(modes[i], t) for i, t in enumerate(tiler)], *modes[len(tiler) :])


def _flat_modes(layout: Layout):
    return list(zip(flatten(layout.shape), flatten(layout.stride), strict=True))


def _from_modes(modes) -> Layout:
    """A layout from (shape, stride) leaves: 1:0 when empty, int-shaped for one, flat otherwise."""
    if not modes:
        return Layout(1, 0)
    if len(modes) == 1:
        return Layout(*modes[0])
    return Layout(tuple(s for s, _ in modes), tuple(d for _, d in modes))


def coalesce(layout: Layout, profile=None) -> Layout:
    """The same function on ``range(size)`` with as few modes as possible.

    Size-1 modes go, and mode ``(s1:d1)`` followed by ``(s2:s1*d1)`` merges into ``s1*s2:d1``.
    With a ``profile`` (a tuple) only the modes it lists are coalesced, each separately, keeping
    the rank.  ``coalesce((2,(1,6)):(1,(6,2))) == 12:1``.
    """
    if profile is not None and is_tuple(profile):
        return _by_mode(layout, profile, coalesce)
    merged: list[tuple[int, int]] = []
    for s, d in _flat_modes(layout):
        if s == 1:
            continue
        if merged and merged[-1][0] * merged[-1][1] == d:
            prev_s, prev_d = merged[-1]
            merged[-1] = (prev_s * s, prev_d)
        else:
            merged.append((s, d))
    return _from_modes(merged)


def filter(layout: Layout) -> Layout:  # shadows the builtin on purpose: CuTe's name
    """Coalesce after dropping stride-0 (broadcast) modes: ``filter((4,3):(0,2)) == 3:2``."""
    return coalesce(_from_modes([(s, d) for s, d in _flat_modes(layout) if d != 0]))


def _place_leaf(a_modes, s: int, d: int):
    """Where the leaf ``s:d`` lands among ``a``'s flat (coalesced) modes, read as mixed-radix digits.

    Returns ``(out, usage)``: ``out`` lists the result's (shape, stride) modes, ``usage[j]`` the
    largest digit the leaf puts into mode ``j`` of ``a`` (for all but the last mode, which is
    unbounded).  The step ``d`` first skips whole modes of ``a``; then the ``s`` steps stay inside
    one mode or fill modes completely, one after the other.
    """
    if d == 0:
        return [(s, 0)], {}
    out, usage = [], {}
    rest_s, rest_d = s, d
    for j, (a_s, a_d) in enumerate(a_modes[:-1]):
        if rest_s == 1:
            break
        if (rest_s - 1) * rest_d < a_s:  # all remaining steps fit inside this mode
            out.append((rest_s, rest_d * a_d))
            usage[j] = (rest_s - 1) * rest_d
            rest_s = 1
        elif rest_d % a_s == 0:  # each step jumps over this mode
            rest_d //= a_s
        elif a_s % rest_d == 0 and rest_s % (a_s // rest_d) == 0:  # fill this mode, carry on above
            steps = a_s // rest_d
            out.append((steps, rest_d * a_d))
            usage[j] = a_s - rest_d
            rest_s //= steps
            rest_d = 1
        else:
            raise LayoutError(
                f"cannot compose with {s}:{d}: {rest_s} steps of {rest_d} do not split evenly "
                f"over a mode of extent {a_s}"
            )
    if rest_s > 1:
        out.append((rest_s, rest_d * a_modes[-1][1]))
    return out, usage


def composition(a, b):
    """``R = composition(A, B)`` with ``R(i) == A(B(i))`` for every ``i < size(B)``.

    ``B`` may be a layout (the result has B's profile), an int ``n`` (meaning ``n:1``), or a tuple
    "tiler" composing A mode by mode.  A ``Swizzle``/``ComposedLayout`` as ``A`` gives a
    ``ComposedLayout``.  Raises ``LayoutError`` where no layout represents ``A o B``: strides or
    shapes that do not divide, or modes of ``B`` whose sum would carry across a mode of ``A``.

    >>> composition(Layout((6, 2), (8, 2)), Layout((4, 3), (3, 1)))
    ((2,2),3):((24,2),8)
    """
    if isinstance(a, Swizzle):
        return ComposedLayout(a, _as_layout(b))
    if isinstance(a, ComposedLayout):
        return ComposedLayout(a.outer, composition(a.inner, b))
    a = _as_layout(a)
    if is_tuple(b):
        return _by_mode(a, b, composition)
    b = _as_layout(b)
    a_modes = _flat_modes(coalesce(a))
    usage = [0] * len(a_modes)

    def compose(mode: Layout) -> Layout:
        if is_tuple(mode.shape):
            return make_layout(*[compose(m) for m in mode])
        out, used = _place_leaf(a_modes, mode.shape, mode.stride)
        for j, u in used.items():
            usage[j] += u
        return coalesce(_from_modes(out))

    result = compose(b)
    # The result adds up A(B_k(i_k)) over B's leaves, which equals A(B(i)) only if adding the
    # leaves' digits in A's mixed radix never carries.
    for j, (a_s, _) in enumerate(a_modes[:-1]):
        if usage[j] >= a_s:
            raise LayoutError(
                f"cannot compose {a} with {b}: its modes overlap inside mode {j} of the coalesced "
                f"layout, so the offsets would carry"
            )
    return result


def complement(layout: Layout, cotarget: int | None = None) -> Layout:
    """The layout of the "holes" of ``layout``, repeated until ``cotarget`` is covered.

    ``make_layout(layout, complement(layout, M))`` is injective, and a bijection onto ``range(M)``
    when ``layout`` is injective and ``M`` a multiple of its extent.  ``cotarget`` defaults to
    ``cosize(layout)``.  ``complement(4:2, 24) == (2,3):(1,8)``: the gap below stride 2 (2:1),
    then copies of the whole 8-element span (3:8).
    """
    layout = _as_layout(layout)
    if cotarget is None:
        cotarget = layout.cosize()
    modes = sorted((d, s) for s, d in _flat_modes(layout) if s != 1 and d != 0)
    out = []
    covered = 1  # every offset below `covered` is reached by the modes seen so far (with the holes)
    for d, s in modes:
        if d % covered != 0:
            raise LayoutError(f"{layout} has no complement: stride {d} is not a multiple of {covered}")
        out.append((d // covered, covered))
        covered = s * d
    out.append(((cotarget + covered - 1) // covered, covered))
    return coalesce(_from_modes(out))


def right_inverse(layout: Layout) -> Layout:
    """``R`` with ``layout(R(i)) == i`` for ``i < size(R)``, as large as the layout allows.

    ``right_inverse((4,2):(2,1)) == (2,4):(4,1)``.
    """
    layout = _as_layout(layout)
    flat_shape = flatten(layout.shape)
    index_strides = prefix_product(flat_shape)  # where each mode sits in the linear index
    out = []
    expected = 1  # the next offset the inverse must reach
    for d, s, idx_stride in sorted(zip(flatten(layout.stride), flat_shape, index_strides, strict=True)):
        if s == 1:
            continue
        if d != expected:
            break
        out.append((s, idx_stride))
        expected = s * d
    return coalesce(_from_modes(out))


def left_inverse(layout: Layout) -> Layout:
    """``L`` with ``L(layout(i)) == i`` for ``i < size(layout)``; needs an injective layout.

    ``left_inverse(4:2) == (2,4):(4,1)`` (odd offsets are never produced; they map anywhere).
    """
    layout = _as_layout(layout)
    return right_inverse(make_layout(layout, complement(layout)))


def _map_inner(layout, fn):
    # Divides/products rearrange modes; for a swizzled layout they act on the inner layout.
    if isinstance(layout, ComposedLayout):
        return ComposedLayout(layout.outer, fn(layout.inner))
    return fn(layout)


def logical_divide(a, tiler):
    """Split A into (tile, rest): ``composition(A, make_layout(B, complement(B, size(A))))``.

    Mode 0 walks one tile, mode 1 walks the tiles.  A tuple tiler divides A mode by mode.
    ``logical_divide(24:1, 4:2) == (4,(2,3)):(2,(1,8))``: tiles of the even offsets 0,2,4,6,
    the second mode stepping 1 (to the odd tile) and 8 (to the next pair).
    """
    if is_tuple(tiler):
        return _map_inner(a, lambda inner: _by_mode(inner, tiler, logical_divide))
    b = _as_layout(tiler)
    return composition(a, make_layout(b, complement(b, size(a))))


def _regroup(divided: Layout, tiler, flatten_rest: bool) -> Layout:
    """From ``((t0,r0),(t1,r1),..., rest...)`` build ``((t0,t1,..),(r0,r1,..,rest..))``."""
    if not is_tuple(tiler):
        tile, rest = divided[0], divided[1]
        rests = list(rest) if flatten_rest and rest.rank() > 1 else [rest]
        return make_layout(tile, *rests)
    n = len(tiler)
    tiles = [divided[i][0] for i in range(n)]
    rests = [divided[i][1] for i in range(n)] + [divided[i] for i in range(n, divided.rank())]
    if flatten_rest:
        return make_layout(make_layout(*tiles), *rests)
    return make_layout(make_layout(*tiles), make_layout(*rests))


def zipped_divide(a, tiler):
    """``logical_divide`` with the tile modes gathered in mode 0 and the rest in mode 1.

    ``zipped_divide(A, B)[0]`` is one tile: ``composition(A, B)`` (by mode for a tuple tiler).
    """
    return _map_inner(logical_divide(a, tiler), lambda L: _regroup(L, tiler, flatten_rest=False))


def tiled_divide(a, tiler):
    """Like ``zipped_divide`` but the rest modes are spread out: ``(tile, r0, r1, ...)``."""
    return _map_inner(logical_divide(a, tiler), lambda L: _regroup(L, tiler, flatten_rest=True))


def logical_product(a, b):
    """``(A, complement(A, size(A)*cosize(B)) o B)``: A repeated in the pattern of B.

    Mode 0 is A itself, mode 1 places the copies.  A tuple ``b`` multiplies mode by mode.
    ``logical_product(2:1, 3:1) == (2,3):(1,2)``.
    """
    if is_tuple(b):
        return _map_inner(a, lambda inner: _by_mode(inner, b, logical_product))
    b = _as_layout(b)

    def product_of(inner):
        return make_layout(inner, composition(complement(inner, inner.size() * b.cosize()), b))

    return _map_inner(a, product_of)


def _zip_product(a: Layout, b: Layout, tile_first: bool) -> Layout:
    a, b = _as_layout(a), _as_layout(b)
    r = max(a.rank(), b.rank())

    def pad(L: Layout) -> Layout:
        return make_layout(*list(L), *[Layout(1, 0)] * (r - L.rank()))

    prod = logical_product(pad(a), pad(b))
    tile, reps = prod[0], prod[1]
    modes = [(tile[i], reps[i]) if tile_first else (reps[i], tile[i]) for i in range(r)]
    return make_layout(*[make_layout(x, y) for x, y in modes])


def blocked_product(a: Layout, b: Layout) -> Layout:
    """Mode ``i`` is ``(A_i, B_i')``: whole copies of A laid out in B's pattern.

    ``blocked_product((2,2):(1,2), (2,3):(1,2))`` is a 4x6 matrix of 2x2 blocks.
    """
    return _zip_product(a, b, tile_first=True)


def raked_product(a: Layout, b: Layout) -> Layout:
    """Mode ``i`` is ``(B_i', A_i)``: A's elements interleaved ("raked") across B's copies."""
    return _zip_product(a, b, tile_first=False)


class Swizzle:
    """CuTe's ``Swizzle<B, M, S>``: XOR ``B`` bits at ``M+S`` into the ``B`` bits at ``M``.

    ``Swizzle(b, m, s)(x) == x ^ ((x & (((1 << b) - 1) << (m + s))) >> s)``; a negative ``s``
    takes the bits from below instead.  It is a bijection and an involution (``|s| >= b``).
    Generic over the offset type, like layout evaluation.

    >>> Swizzle(3, 3, 3)(200)   # 0b011_001_000: bits 6..8 (0b011) xor into bits 3..5
    208
    """

    __slots__ = ("bits", "base", "shift")

    def __init__(self, bits: int, base: int, shift: int):
        if bits < 0 or base < 0:
            raise LayoutError(f"Swizzle({bits}, {base}, {shift}): bits and base must be >= 0")
        if abs(shift) < bits:
            raise LayoutError(f"Swizzle({bits}, {base}, {shift}): |shift| must be >= bits (masks overlap)")
        self.bits, self.base, self.shift = int(bits), int(base), int(shift)

    def source_mask(self) -> int:
        """The bits that are read (``yyy`` in CuTe)."""
        return ((1 << self.bits) - 1) << (self.base + max(0, self.shift))

    def __call__(self, offset):
        picked = offset & self.source_mask()
        moved = picked >> self.shift if self.shift >= 0 else picked << -self.shift
        return offset ^ moved

    def size(self) -> int:
        """The swizzle permutes ``range(size())`` (and repeats with that period)."""
        return 1 << (self.bits + self.base + abs(self.shift))

    def cosize(self) -> int:
        return self.size()

    def __eq__(self, other):
        return isinstance(other, Swizzle) and self._key() == other._key()

    def _key(self):
        return (self.bits, self.base, self.shift)

    def __hash__(self):
        return hash(("Swizzle", *self._key()))

    def __repr__(self):
        return f"Sw<{self.bits},{self.base},{self.shift}>"


class ComposedLayout:
    """``outer o inner``: ``inner`` (a Layout) maps coordinates to offsets, then ``outer`` (a
    Swizzle or Layout) remaps the offset.  Size, shape and modes are those of ``inner``.

    >>> ComposedLayout(Swizzle(1, 0, 1), Layout(4))(1), ComposedLayout(Swizzle(1, 0, 1), Layout(4))(2)
    (1, 3)
    """

    __slots__ = ("outer", "inner")

    def __init__(self, outer, inner: Layout):
        self.outer = outer
        self.inner = _as_layout(inner)

    def __call__(self, *coord):
        return self.outer(self.inner(*coord))

    def to_symbolic(self, coord="i"):
        """The swizzled offset formula as a ``Sym`` (see ``Layout.to_symbolic``)."""
        return as_sym(self(_as_symbolic_coord(coord)))

    @property
    def shape(self):
        return self.inner.shape

    def size(self) -> int:
        return self.inner.size()

    def cosize(self) -> int:
        """One past the largest offset.  Swizzles move offsets around, so evaluate them all."""
        return int(np.max(self(np.arange(self.size(), dtype=np.int64)))) + 1

    def rank(self) -> int:
        return self.inner.rank()

    def __getitem__(self, i):
        return ComposedLayout(self.outer, self.inner[i])

    def __eq__(self, other):
        return isinstance(other, ComposedLayout) and self.outer == other.outer and self.inner == other.inner

    def __hash__(self):
        return hash((self.outer, self.inner))

    def __repr__(self):
        return f"{self.outer!r} o {self.inner!r}"
