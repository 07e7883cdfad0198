"""Nested integer tuples ("IntTuples"), the shapes, strides and coordinates of the layout algebra.

An IntTuple is either an integer or a tuple of IntTuples: ``4``, ``(4, 2)``, ``((2, 2), 8)``.
Everything here is a small pure function.  Two kinds live side by side:

* *static* functions (``product``, ``prefix_product``, ``shape_div`` ...) take Python ints only;
  they build layouts and run at trace time.
* *evaluation* functions (``idx2crd``, ``crd2idx``, ``inner_product``) are generic over the
  scalar type of indices and coordinates: they only apply ``+ * // %`` to them, so they work on
  Python ints, elementwise on numpy integer arrays and on ``tilepy.symbolic.Sym`` expressions.
  Only the (static) shape and stride steer control flow there, never a coordinate value.

Index <-> coordinate conversions are colexicographic (column-major), as in CuTe: the leftmost
mode varies fastest.
"""

from __future__ import annotations

from numbers import Integral

from tilepy.errors import TilepyError


class LayoutError(TilepyError, ValueError):
    """A layout operation is undefined for the given shapes/strides (e.g. non-divisible tiling)."""


def is_int(x) -> bool:
    """True for a (static) integer, Python or numpy, but not for bool."""
    return isinstance(x, Integral) and not isinstance(x, bool)


def is_tuple(x) -> bool:
    return isinstance(x, tuple)


def as_int_tuple(x):
    """Normalize lists to tuples and numpy integers to ``int``; reject anything else.

    >>> as_int_tuple([2, [3, 4]])
    (2, (3, 4))
    """
    if isinstance(x, (tuple, list)):
        return tuple(as_int_tuple(e) for e in x)
    if is_int(x):
        return int(x)
    raise LayoutError(f"expected an int or a nested tuple of ints, got {x!r}")


def flatten(t) -> tuple:
    """All leaves, left to right: ``flatten(((2, 3), 4)) == (2, 3, 4)``; an int gives a 1-tuple."""
    if is_tuple(t):
        return tuple(leaf for e in t for leaf in flatten(e))
    return (t,)


def rank(t) -> int:
    """Number of top-level modes: ``rank((2, (3, 4))) == 2``, ``rank(5) == 1``."""
    return len(t) if is_tuple(t) else 1


def depth(t) -> int:
    """Nesting depth: ``depth(5) == 0``, ``depth((2, 3)) == 1``, ``depth(((2, 3), 4)) == 2``."""
    if is_tuple(t):
        return 1 + max((depth(e) for e in t), default=0)
    return 0


def product(t) -> int:
    """Product of all leaves: ``product(((2, 3), 4)) == 24``; the empty tuple gives 1."""
    result = 1
    for leaf in flatten(t):
        result *= leaf
    return result


def congruent(a, b) -> bool:
    """Same nesting profile (leaf values may differ): ``congruent((1, (2, 3)), (4, (5, 6)))``."""
    if is_tuple(a) and is_tuple(b):
        return len(a) == len(b) and all(congruent(x, y) for x, y in zip(a, b, strict=True))
    return not is_tuple(a) and not is_tuple(b)


def compatible(a, b) -> bool:
    """True if coordinates of shape ``a`` can index shape ``b``: ``a`` is an int of size ``b``,
    or both are tuples of equal rank with compatible modes.  ``compatible(6, (2, 3))``."""
    if is_tuple(a):
        return is_tuple(b) and len(a) == len(b) and all(compatible(x, y) for x, y in zip(a, b, strict=True))
    return a == product(b)


def prefix_product(t, init: int = 1):
    """Exclusive running product over the leaves, keeping ``t``'s profile.

    These are the compact column-major strides of shape ``t``:
    ``prefix_product((2, (3, 4))) == (1, (2, 6))``.
    """
    if is_tuple(t):
        out = []
        running = init
        for e in t:
            out.append(prefix_product(e, running))
            running *= product(e)
        return tuple(out)
    return init


def suffix_product(t, init: int = 1):
    """Exclusive running product from the right: the compact row-major strides of ``t``.

    ``suffix_product((2, (3, 4))) == (12, (4, 1))``.
    """
    if is_tuple(t):
        out = []
        running = init
        for e in reversed(t):
            out.append(suffix_product(e, running))
            running *= product(e)
        return tuple(reversed(out))
    return init


def shape_div(a, b):
    """Divide shape ``a`` by ``b``, peeling ``b`` off ``a``'s leaves from the left.

    Each step needs one of the two to divide the other, and rounds up
    (``shape_div(2, 4) == 1``: dividing away more than a mode leaves a mode of size 1).
    ``shape_div((4, 6), 8) == (1, 3)`` because 8 swallows the 4 and then halves the 6.
    """
    if is_tuple(a):
        if is_tuple(b):
            if len(a) != len(b):
                raise LayoutError(f"shape_div: rank mismatch between {a} and {b}")
            return tuple(shape_div(x, y) for x, y in zip(a, b, strict=True))
        out = []
        for e in a:
            out.append(shape_div(e, b))
            b = shape_div(b, product(e))
        return tuple(out)
    if is_tuple(b):
        return shape_div(a, product(b))
    if a % b != 0 and b % a != 0:
        raise LayoutError(f"shape_div: neither of {a} and {b} divides the other")
    return (a + b - 1) // b


def elem_scale(a, b):
    """Multiply ``a`` leafwise by ``b`` (``b`` an int, or congruent with ``a``)."""
    if is_tuple(a):
        if is_tuple(b):
            return tuple(elem_scale(x, y) for x, y in zip(a, b, strict=True))
        return tuple(elem_scale(x, b) for x in a)
    return a * product(b)


# --- evaluation: generic over the scalar type of indices/coordinates -------------------------


def _sum(terms):
    # Start from the first term instead of 0 so a lone numpy array or Sym comes back untouched.
    terms = list(terms)
    if not terms:
        return 0
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return total


def inner_product(a, b):
    """Sum of leafwise products of two congruent tuples: ``inner_product((1, (2, 3)), (4, (5, 6))) == 32``.

    Generic: either side may hold numpy arrays or Sym expressions.
    """
    if is_tuple(a):
        if not is_tuple(b) or len(a) != len(b):
            raise LayoutError(f"inner_product: {a!r} and {b!r} are not congruent")
        return _sum(inner_product(x, y) for x, y in zip(a, b, strict=True))
    return a * b


def idx2crd(idx, shape, stride=None):
    """Linear index -> (nested) coordinate of ``shape``, colexicographically.

    ``stride`` defaults to the compact column-major strides of ``shape``.
    ``idx2crd(5, (2, 3)) == (1, 2)`` since 5 = 1 + 2*2.
    A tuple ``idx`` is taken as already (partly) a coordinate and converted mode by mode.
    Generic over the scalar type of ``idx``.
    """
    if stride is None:
        stride = prefix_product(shape)
    if is_tuple(idx):
        if not is_tuple(shape) or len(idx) != len(shape):
            raise LayoutError(f"idx2crd: coordinate {idx!r} does not match shape {shape}")
        return tuple(idx2crd(i, s, d) for i, s, d in zip(idx, shape, stride, strict=True))
    if is_tuple(shape):
        return tuple(idx2crd(idx, s, d) for s, d in zip(shape, stride, strict=True))
    return (idx // stride) % shape


def crd2idx(crd, shape, stride=None):
    """(Nested) coordinate -> linear offset ``sum(crd_i * stride_i)``.

    ``stride`` defaults to the compact column-major strides of ``shape``, making this the inverse
    of ``idx2crd``.  A coordinate may be coarser than the shape: an int against a tuple mode is
    first split colexicographically over that mode's leaves.  The last leaf is not reduced modulo
    its extent, so an index past the end extends the last mode (CuTe does the same).
    ``crd2idx((1, 2), (2, 3)) == 5``; ``crd2idx(5, (2, 3), (3, 1)) == 1*3 + 2*1 == 5``.
    Generic over the scalar type of ``crd``.
    """
    if stride is None:
        stride = prefix_product(shape)
    if is_tuple(crd):
        if not is_tuple(shape) or len(crd) != len(shape):
            raise LayoutError(f"crd2idx: coordinate {crd!r} does not match shape {shape}")
        return _sum(crd2idx(c, s, d) for c, s, d in zip(crd, shape, stride, strict=True))
    if is_tuple(shape):
        if len(shape) == 0:
            return crd * 0  # keeps the scalar type (array/Sym) of crd
        terms = []
        for s, d in zip(shape[:-1], stride[:-1], strict=True):
            extent = product(s)
            terms.append(crd2idx(crd % extent, s, d))
            crd = crd // extent
        terms.append(crd2idx(crd, shape[-1], stride[-1]))
        return _sum(terms)
    return crd * stride
