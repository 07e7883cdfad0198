"""A tiny integer expression language for layout offsets.

Layouts and swizzles evaluate on anything that supports ``+ - * // % ^ & | >> <<``; feeding them a
``Var`` instead of an int yields the offset *formula* as a ``Sym`` tree, which the verifier turns
into SMT bit-vector terms.  So only integer operations exist here:

* ``Var(name, bits=32)``: a free variable; ``bits`` is the bit-vector width the verifier should use.
* ``Const(value)``: an integer literal.
* ``BinOp(op, a, b)``: ``op`` one of ``BINARY_OPS``.

Semantics are those of Python integers (``evaluate`` is the reference).  ``//`` and ``%`` by a
constant must be by a positive one; since layout coordinates are never negative, floor division /
modulo coincide with the unsigned bit-vector ones (``bvudiv``/``bvurem``).

Building an expression folds constants and neutral elements (``x*1 -> x``, ``x+0 -> x``,
``x*0 -> 0``, ``x//1 -> x``, ``x%1 -> 0``, ``2+3 -> 5`` ...), so a layout's formula mentions only
the arithmetic it needs.  Nodes are immutable, compare structurally and hash.

A ``Sym`` has no truth value: ``if sym:``, ``min(sym, 3)`` and friends raise, which keeps code
that must be generic over coordinates honest.

>>> i = Var("i")
>>> print((i % 4) * 1 + (i // 4) * 8 + 0)
i % 4 + i // 4 * 8
>>> evaluate(i // 4 * 8, {"i": 13})
24
"""

from __future__ import annotations

import operator

BINARY_OPS = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "//": operator.floordiv,
    "%": operator.mod,
    "^": operator.xor,
    "&": operator.and_,
    "|": operator.or_,
    ">>": operator.rshift,
    "<<": operator.lshift,
    # min / max: the verifier's value of tp.minimum / tp.maximum of two scalars (printed as calls)
    "min": lambda a, b: _select(a, b, a <= b),
    "max": lambda a, b: _select(a, b, a >= b),
}
_CALL_OPS = frozenset({"min", "max"})


def _select(a, b, a_wins):
    """a where `a_wins`, else b: ints, or numpy arrays elementwise."""
    if getattr(a_wins, "ndim", 0) == 0:
        return a if a_wins else b
    import numpy

    return numpy.where(a_wins, a, b)


# Python's own precedence, so that str(expr) is also a valid Python expression.
_PRECEDENCE = {"|": 1, "^": 2, "&": 3, "<<": 4, ">>": 4, "+": 5, "-": 5, "*": 6, "//": 6, "%": 6}
_COMMUTATIVE = frozenset({"+", "*", "^", "&", "|"})


class Sym:
    """Base of symbolic integer expressions; see the module docstring."""

    __slots__ = ()
    # Make numpy hand `ndarray <op> Sym` back to us (and fail) instead of building object arrays.
    __array_ufunc__ = None

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __bool__(self):
        raise TypeError(
            "a symbolic integer has no truth value: layout evaluation must not branch on coordinates"
        )

    def __str__(self) -> str:
        return _format(self, 0)

    # The operators; reflected versions put the other operand on the left.
    def __add__(self, other):
        return _binop("+", self, other)

    def __radd__(self, other):
        return _binop("+", other, self)

    def __sub__(self, other):
        return _binop("-", self, other)

    def __rsub__(self, other):
        return _binop("-", other, self)

    def __mul__(self, other):
        return _binop("*", self, other)

    def __rmul__(self, other):
        return _binop("*", other, self)

    def __floordiv__(self, other):
        return _binop("//", self, other)

    def __rfloordiv__(self, other):
        return _binop("//", other, self)

    def __mod__(self, other):
        return _binop("%", self, other)

    def __rmod__(self, other):
        return _binop("%", other, self)

    def __xor__(self, other):
        return _binop("^", self, other)

    def __rxor__(self, other):
        return _binop("^", other, self)

    def __and__(self, other):
        return _binop("&", self, other)

    def __rand__(self, other):
        return _binop("&", other, self)

    def __or__(self, other):
        return _binop("|", self, other)

    def __ror__(self, other):
        return _binop("|", other, self)

    def __rshift__(self, other):
        return _binop(">>", self, other)

    def __rrshift__(self, other):
        return _binop(">>", other, self)

    def __lshift__(self, other):
        return _binop("<<", self, other)

    def __rlshift__(self, other):
        return _binop("<<", other, self)

    def __neg__(self):
        return _binop("-", 0, self)


class Var(Sym):
    """A free integer variable, ``bits`` wide when translated to a bit-vector."""

    __slots__ = ("name", "bits", "_hash")

    def __init__(self, name: str, bits: int = 32):
        if not isinstance(name, str) or not name:
            raise ValueError(f"a variable needs a non-empty string name, got {name!r}")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "bits", int(bits))
        object.__setattr__(self, "_hash", hash(("Var", name, self.bits)))

    def __eq__(self, other):
        return isinstance(other, Var) and self.name == other.name and self.bits == other.bits

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return f"Var({self.name!r})" if self.bits == 32 else f"Var({self.name!r}, bits={self.bits})"


class Const(Sym):
    """An integer literal."""

    __slots__ = ("value", "_hash")

    def __init__(self, value: int):
        object.__setattr__(self, "value", operator.index(value))
        object.__setattr__(self, "_hash", hash(("Const", self.value)))

    def __eq__(self, other):
        return isinstance(other, Const) and self.value == other.value

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return f"Const({self.value})"


class BinOp(Sym):
    """``a <op> b``.  Build through the operators (which fold); construct directly to skip folding."""

    __slots__ = ("op", "a", "b", "_hash")

    def __init__(self, op: str, a: Sym, b: Sym):
        if op not in BINARY_OPS:
            raise ValueError(f"unknown operator {op!r}; expected one of {sorted(BINARY_OPS)}")
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "a", as_sym(a))
        object.__setattr__(self, "b", as_sym(b))
        object.__setattr__(self, "_hash", hash(("BinOp", op, self.a, self.b)))

    def __eq__(self, other):
        return (
            isinstance(other, BinOp)
            and self._hash == other._hash
            and self.op == other.op
            and self.a == other.a
            and self.b == other.b
        )

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return f"BinOp({self.op!r}, {self.a!r}, {self.b!r})"


def _lift(x):
    """``x`` as a Sym, or None when it is neither a Sym nor an integer (numpy integers count)."""
    if isinstance(x, Sym):
        return x
    if isinstance(x, bool):
        return None
    try:
        return Const(operator.index(x))
    except TypeError:
        return None


def as_sym(x) -> Sym:
    """Lift an int (or pass a Sym through): ``as_sym(3) == Const(3)``."""
    s = _lift(x)
    if s is None:
        raise TypeError(f"cannot use {type(x).__name__} {x!r} in a symbolic integer expression")
    return s


def _const(x):
    return x.value if isinstance(x, Const) else None


def _binop(op: str, a, b):
    a, b = _lift(a), _lift(b)
    if a is None or b is None:
        return NotImplemented
    return _fold(op, a, b)


def _fold(op: str, a: Sym, b: Sym) -> Sym:
    ca, cb = _const(a), _const(b)
    if op in ("//", "%") and cb is not None and cb <= 0:
        raise ZeroDivisionError(f"'{op}' by {cb}: only positive constant divisors are supported")
    if op in ("<<", ">>") and cb is not None and cb < 0:
        raise ValueError(f"negative shift count {cb}")
    if ca is not None and cb is not None:
        return Const(BINARY_OPS[op](ca, cb))
    # Constants go right in commutative ops, so the rules below need only look at `b`.
    if op in _COMMUTATIVE and ca is not None:
        a, b, ca, cb = b, a, cb, ca
    if cb is not None:
        folded = _fold_const_right(op, a, cb)
        if folded is not None:
            return folded
    if ca == 0 and op in ("//", "%", ">>", "<<"):
        return Const(0)
    if a == b and op in ("-", "^"):
        return Const(0)
    if a == b and op in ("&", "|", "min", "max"):
        return a
    return BinOp(op, a, b)


def _fold_const_right(op: str, a: Sym, c: int):
    """Simplify ``a <op> c`` for a constant ``c``; None when no rule applies."""
    if c == 0:
        if op in ("+", "-", "^", "|", ">>", "<<"):
            return a
        if op in ("*", "&"):
            return Const(0)
    if c == 1:
        if op in ("*", "//"):
            return a
        if op == "%":
            return Const(0)
    # Merge a constant into the same operation one level down: (x*2)*4 -> x*8.
    inner = _const(a.b) if isinstance(a, BinOp) else None
    if inner is not None:
        if a.op == op and op in ("+", "*", "^", "&", "|"):
            return _fold(op, a.a, Const(BINARY_OPS[op](inner, c)))
        if a.op == op == "//":  # floor(floor(x/p)/q) == floor(x/(p*q)) for p, q > 0
            return _fold("//", a.a, Const(inner * c))
        if a.op == op and op in (">>", "<<"):
            return _fold(op, a.a, Const(inner + c))
        if a.op == op == "%" and inner % c == 0:  # (x % 8) % 4 == x % 4
            return _fold("%", a.a, Const(c))
    return None


def _format(e: Sym, parent_prec: int, right: bool = False) -> str:
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Const):
        return str(e.value)
    if e.op in _CALL_OPS:
        return f"{e.op}({_format(e.a, 0)}, {_format(e.b, 0)})"
    prec = _PRECEDENCE[e.op]
    text = f"{_format(e.a, prec)} {e.op} {_format(e.b, prec, right=True)}"
    # Left-associative: a right operand of equal precedence needs parentheses, a left one doesn't.
    if prec < parent_prec or (right and prec == parent_prec):
        return f"({text})"
    # Few readers know that `+` binds tighter than `&` or that `>>` beats `^`: under a bitwise
    # operator, spell out any grouping that mixes precedence levels.
    if parent_prec and parent_prec < _PRECEDENCE["+"] and prec != parent_prec:
        return f"({text})"
    return text


def evaluate(expr, env: dict):
    """Value of ``expr`` with each ``Var`` looked up by name in ``env``.

    Values may be ints or numpy integer arrays (evaluated elementwise, with broadcasting); they
    may even be Syms, which substitutes.  A plain int ``expr`` is returned as is.

    >>> evaluate(Var("i") % 4 + Var("j") * 4, {"i": 6, "j": 1})
    6
    """
    memo: dict[int, object] = {}

    def ev(e):
        key = id(e)
        if key in memo:
            return memo[key]
        if isinstance(e, Const):
            value = e.value
        elif isinstance(e, Var):
            try:
                value = env[e.name]
            except KeyError:
                raise KeyError(f"evaluate: no value given for variable {e.name!r}") from None
        elif isinstance(e, BinOp):
            value = BINARY_OPS[e.op](ev(e.a), ev(e.b))
        else:
            raise TypeError(f"evaluate: not a symbolic expression: {e!r}")
        memo[key] = value
        return value

    if not isinstance(expr, Sym):
        return expr
    return ev(expr)


def free_vars(expr) -> frozenset:
    """The set of ``Var`` nodes in ``expr``.

    >>> sorted(v.name for v in free_vars(Var("i") * 2 + Var("j")))
    ['i', 'j']
    """
    found = set()
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, Var):
            found.add(e)
        elif isinstance(e, BinOp):
            stack.extend((e.a, e.b))
    return frozenset(found)
