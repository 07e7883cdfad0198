"""Integer index expressions: what the lowering computes element coordinates with.

A normal form of `const + sum(coef * atom)`, where an atom is a loop variable, `x // d` or `x % m`, with
bounds tracked so that views fold away: flattening the coordinates of a contiguous unflatten gives back the
flat index, which is what lets a generated kernel use a plain window load instead of a gather.

>>> i = Var("i", 24)
>>> c = unflatten(i, (2, 3, 4))
>>> [str(x) for x in c]
['(i // 12)', '((i // 4) % 3)', '(i % 4)']
>>> str(flatten(c, (2, 3, 4)))
'i'
"""

from __future__ import annotations

import math


class IExpr:
    """Base class: immutable, hashable, with inclusive bounds `lo`/`hi` (None when unbounded)."""

    __slots__ = ("_key", "_hash", "lo", "hi")

    def _init(self, key, lo, hi):
        self._key = key
        self._hash = hash(key)
        self.lo, self.hi = lo, hi

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return isinstance(other, IExpr) and self._hash == other._hash and self._key == other._key

    def __repr__(self):
        return f"IExpr({self})"

    def __add__(self, other):
        return add(self, as_index(other))

    __radd__ = __add__

    def __sub__(self, other):
        return add(self, scale(as_index(other), -1))

    def __rsub__(self, other):
        return add(as_index(other), scale(self, -1))

    def __mul__(self, c):
        return scale(self, int(c))

    __rmul__ = __mul__

    def __floordiv__(self, d):
        return floordiv(self, int(d))

    def __mod__(self, m):
        return mod(self, int(m))

    @property
    def const(self) -> int | None:
        return None


class Var(IExpr):
    """A loop variable with values in [0, size)."""

    __slots__ = ("name", "size")

    def __init__(self, name: str, size: int):
        self.name, self.size = name, int(size)
        self._init(("v", name, self.size), 0, max(0, self.size - 1))

    def __str__(self):
        return self.name


class Div(IExpr):
    __slots__ = ("x", "d")

    def __init__(self, x: IExpr, d: int):
        self.x, self.d = x, d
        lo = None if x.lo is None else x.lo // d
        hi = None if x.hi is None else x.hi // d
        self._init(("div", x._key, d), lo, hi)

    def __str__(self):
        return f"({self.x} // {self.d})"


class Mod(IExpr):
    __slots__ = ("x", "m")

    def __init__(self, x: IExpr, m: int):
        self.x, self.m = x, m
        hi = m - 1
        if x.lo is not None and x.lo >= 0 and x.hi is not None:
            hi = min(hi, x.hi)
        self._init(("mod", x._key, m), 0, hi)

    def __str__(self):
        return f"({self.x} % {self.m})"


class Sum(IExpr):
    """const + sum(coef * atom); build with `add`/`scale`, never directly."""

    __slots__ = ("c", "terms")

    def __init__(self, c: int, terms: tuple):
        self.c, self.terms = c, terms
        lo = hi = c
        for coef, atom in terms:
            a, b = (atom.lo, atom.hi)
            if a is None or b is None:
                lo = hi = None
                break
            x, y = coef * a, coef * b
            lo, hi = lo + min(x, y), hi + max(x, y)
        self._init(("sum", c, tuple((k, a._key) for k, a in terms)), lo, hi)

    @property
    def const(self):
        return self.c if not self.terms else None

    def __str__(self):
        if not self.terms:
            return str(self.c)
        parts = []
        for coef, atom in self.terms:
            s = str(atom) if abs(coef) == 1 else f"{abs(coef)} * {atom}"
            parts.append((coef < 0, s))
        if self.c:
            parts.append((self.c < 0, str(abs(self.c))))
        text = ("-" if parts[0][0] else "") + parts[0][1]
        for neg, s in parts[1:]:
            text += (" - " if neg else " + ") + s
        return text if len(parts) == 1 and not parts[0][0] else f"({text})"


def const(c: int) -> IExpr:
    return Sum(int(c), ())


def as_index(x) -> IExpr:
    return x if isinstance(x, IExpr) else const(int(x))


def _terms(e: IExpr) -> tuple[int, list]:
    if isinstance(e, Sum):
        return e.c, list(e.terms)
    return 0, [(1, e)]


def _make(c: int, terms: list) -> IExpr:
    merged: dict = {}
    order = []
    for coef, atom in terms:
        if atom not in merged:
            order.append(atom)
            merged[atom] = 0
        merged[atom] += coef
    terms = [(merged[a], a) for a in order if merged[a]]
    terms = _recombine(terms)
    if len(terms) == 1 and c == 0 and terms[0][0] == 1:
        return terms[0][1]
    return Sum(c, tuple(terms))


def _recombine(terms: list) -> list:
    """a*d*(x // d) + a*(x % d) -> a*x and a*d*((x // d) % n) + a*(x % d) -> a*(x % (d*n)), to a fixpoint."""
    changed = True
    while changed:
        changed = False
        for j, (a2, t2) in enumerate(terms):
            if not isinstance(t2, Mod):
                continue
            x, d = t2.x, t2.m
            for k, (a1, t1) in enumerate(terms):
                if k == j or a1 != a2 * d:
                    continue
                if isinstance(t1, Div) and t1.x == x and t1.d == d:
                    new = x
                elif isinstance(t1, Mod) and isinstance(t1.x, Div) and t1.x.x == x and t1.x.d == d:
                    new = mod(x, d * t1.m)
                else:
                    continue
                rest = [t for i, t in enumerate(terms) if i not in (j, k)]
                c0, extra = _terms(scale(new, a2))
                if c0:
                    continue  # keep the normal form simple: only recombine into constant-free terms
                terms = rest + extra
                changed = True
                break
            if changed:
                break
    return terms


def add(a: IExpr, b: IExpr) -> IExpr:
    ca, ta = _terms(a)
    cb, tb = _terms(b)
    return _make(ca + cb, ta + tb)


def scale(a: IExpr, k: int) -> IExpr:
    if k == 0:
        return const(0)
    if k == 1:
        return a
    c, t = _terms(a)
    return _make(c * k, [(coef * k, atom) for coef, atom in t])


def floordiv(a: IExpr, d: int) -> IExpr:
    d = int(d)
    if d <= 0:
        raise ValueError(f"floordiv by {d}")
    if d == 1:
        return a
    if a.const is not None:
        return const(a.const // d)
    if a.lo is not None and a.hi is not None and a.lo >= 0 and a.hi < d:
        return const(0)
    if isinstance(a, Div):
        return floordiv(a.x, a.d * d)
    if isinstance(a, Mod) and a.m % d == 0:
        return mod(floordiv(a.x, d), a.m // d)
    c, terms = _terms(a)
    split = _split_digit(c, terms, d)
    if split is not None:    # (k*x + rest) // d = x // (d/k) when d is a multiple of k and 0 <= rest < k
        k, atom, _ = split
        return floordiv(atom, d // k)
    q = [(coef // d, atom) for coef, atom in terms if coef % d == 0]
    r = [(coef, atom) for coef, atom in terms if coef % d != 0]
    if q:
        rest = _make(c % d, r)
        if rest.lo is not None and rest.hi is not None and rest.lo >= 0 and rest.hi < d:
            return _make(c // d, q)
        if not r and c % d == 0:
            return _make(c // d, q)
        # (Q*d + rest) // d = Q + rest // d for integers: the multiples of d leave the division
        return add(_make(0, q), floordiv(_make(c, r), d))
    return Div(a, d)


def mod(a: IExpr, m: int) -> IExpr:
    m = int(m)
    if m <= 0:
        raise ValueError(f"mod by {m}")
    if m == 1:
        return const(0)
    if a.const is not None:
        return const(a.const % m)
    if a.lo is not None and a.hi is not None and a.lo >= 0 and a.hi < m:
        return a
    if isinstance(a, Mod) and a.m % m == 0:
        return mod(a.x, m)
    c, terms = _terms(a)
    split = _split_digit(c, terms, m)
    if split is not None:    # (k*x + rest) % m = k * (x % (m/k)) + rest when m is a multiple of k, 0 <= rest < k
        k, atom, rest = split
        return add(scale(mod(atom, m // k), k), rest)
    kept = [(coef, atom) for coef, atom in terms if coef % m != 0]
    if len(kept) != len(terms) or c % m != c:
        return mod(_make(c % m, kept), m)  # multiples of m drop out of a modulus, whatever the signs
    return Mod(a, m)


def _split_digit(c, terms, d):
    """(k, x, rest) when the expression is k*x + rest with d a proper multiple of k (k > 1) and rest within
    [0, k): a digit split of a mixed-radix index."""
    if len(terms) < 1:
        return None
    for j, (k, atom) in enumerate(terms):
        if k <= 1 or k >= d or d % k:
            continue
        rest = _make(c, [t for i, t in enumerate(terms) if i != j])
        if rest.lo is not None and rest.hi is not None and rest.lo >= 0 and rest.hi < k:
            return k, atom, rest
    return None


def contiguous_strides(shape) -> tuple:
    strides, s = [], 1
    for n in reversed(tuple(shape)):
        strides.append(s)
        s *= int(n)
    return tuple(reversed(strides))


def unflatten(flat: IExpr, shape) -> list:
    """Row-major coordinates of a flat index into `shape`."""
    shape = tuple(int(n) for n in shape)
    return [mod(floordiv(flat, s), n) if n > 1 else const(0) for n, s in zip(shape, contiguous_strides(shape))]


def flatten(coords, shape, strides=None, offset: int = 0) -> IExpr:
    """offset + sum(coord * stride); row-major strides of `shape` unless given."""
    strides = contiguous_strides(shape) if strides is None else strides
    out = const(offset)
    for c, s, n in zip(coords, strides, shape):
        if int(n) != 1:
            out = add(out, scale(as_index(c), int(s)))
    return out


def numel(shape) -> int:
    return math.prod(int(n) for n in shape)


def variables(e: IExpr) -> set:
    """The loop variables an expression reads."""
    if isinstance(e, Var):
        return {e}
    if isinstance(e, (Div, Mod)):
        return variables(e.x)
    if isinstance(e, Sum):
        out = set()
        for _, a in e.terms:
            out |= variables(a)
        return out
    return set()


def substitute(e: IExpr, mapping: dict) -> IExpr:
    """Replace loop variables by expressions (re-normalizing on the way)."""
    if isinstance(e, Var):
        return mapping.get(e.name, e)
    if isinstance(e, Div):
        return floordiv(substitute(e.x, mapping), e.d)
    if isinstance(e, Mod):
        return mod(substitute(e.x, mapping), e.m)
    if isinstance(e, Sum):
        out = const(e.c)
        for coef, a in e.terms:
            out = add(out, scale(substitute(a, mapping), coef))
        return out
    return e
