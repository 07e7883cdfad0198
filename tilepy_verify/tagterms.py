"""Tag terms: what the verifier knows about the `tp.tag` annotation of one element.

A tag is a nested Python structure of constants (str, int, float, None), `Sym` integers and tuples, e.g.
``("A", m0 + i, k * 32 + kk)``; `TOP` stands for "unknown" (a tag the analysis could not follow). Where the
tag of an element depends on a run-time choice (which copy last wrote a pipeline stage), a tile's tag is a
list of alternatives `Alt(cond, tag, src)`: `cond` is a bool term saying when the alternative applies (it
also carries the range of every auxiliary variable the tag mentions) and `src` is the span of the op that
produced it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from tilepy.symbolic import Sym

from .vc import AND, NOT, OR, cmp, const_of, is_int


class _Top:
    def __repr__(self):
        return "<unknown tag>"


TOP = _Top()


class Unknown(Exception):
    """A predicate met a TOP tag."""


@dataclass(frozen=True)
class Alt:
    cond: object
    tag: object
    src: object = None  # Span of the op that produced this tag


def is_num(x) -> bool:
    return isinstance(x, Sym) or is_int(x)


def product(alt_lists, combine):
    """All combinations of alternatives of several operands: cond = AND of conds, tag = combine(tags)."""
    out = []
    for combo in itertools.product(*alt_lists):
        cond = AND(*(a.cond for a in combo))
        if cond is False:
            continue
        src = next((a.src for a in combo if a.src is not None), None)
        out.append(Alt(cond, combine([a.tag for a in combo]), src))
    return out


def has_top(t) -> bool:
    if t is TOP:
        return True
    if isinstance(t, tuple):
        return any(has_top(x) for x in t)
    return False


# ------------------------------------------------------------------------------------------ TagFn bodies


def eval_tagfn(fn, args: list):
    """Evaluate a TagFn body (tilepy.ir.TagFn.body) on tag structures/Syms. Comparisons give bool terms;
    a TOP operand raises Unknown."""
    env = dict(zip(fn.params, args))
    return _ev(fn.body, env)


def _ev(node, env):
    kind = node[0]
    if kind == "const":
        return node[1]
    if kind == "name":
        return env[node[1]]
    if kind == "tuple":
        return tuple(_ev(x, env) for x in node[1])
    if kind == "index":
        base, idx = _ev(node[1], env), _ev(node[2], env)
        if base is TOP:
            raise Unknown()
        c = const_of(idx)
        if not isinstance(base, tuple) or c is None:
            raise Unknown()
        if not -len(base) <= c < len(base):
            raise Unknown()
        return base[c]
    if kind == "bin":
        a, b = _ev(node[2], env), _ev(node[3], env)
        if a is TOP or b is TOP:
            raise Unknown()
        op = node[1]
        if is_num(a) and is_num(b):
            if op == "/":
                raise Unknown()
            if op == "**":
                ca, cb = const_of(a), const_of(b)
                if ca is None or cb is None:
                    raise Unknown()
                return ca**cb
            return _arith(op, a, b)
        try:
            return _arith(op, a, b)
        except Exception:  # noqa: BLE001 - e.g. str + Sym
            raise Unknown() from None
    if kind == "cmp":
        return tag_cmp(node[1], _ev(node[2], env), _ev(node[3], env))
    if kind == "bool":
        a = _truth(_ev(node[2], env))
        if a is (node[1] == "or"):  # decided by its left operand (as Python's): the right one may not apply
            return a
        b = _truth(_ev(node[3], env))
        return AND(a, b) if node[1] == "and" else OR(a, b)
    if kind == "not":
        return NOT(_truth(_ev(node[1], env)))
    raise Unknown()


def _arith(op, a, b):
    import operator

    return {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
            "%": operator.mod, "&": operator.and_, "|": operator.or_, "^": operator.xor,
            "<<": operator.lshift, ">>": operator.rshift}[op](a, b)


def _truth(x):
    if x is True or x is False:
        return x
    if isinstance(x, tuple) and x and x[0] in ("cmp", "and", "or", "not", "bvar"):
        return x
    if is_num(x):
        return cmp("!=", x, 0)
    if x is TOP:
        raise Unknown()
    return bool(x)


def tag_cmp(op, a, b):
    """A comparison of two tag structures as a bool term (structural for tuples)."""
    if a is TOP or b is TOP:
        raise Unknown()
    if op in ("==", "!="):
        eq = _struct_eq(a, b)
        return eq if op == "==" else NOT(eq)
    if is_num(a) and is_num(b):
        return cmp(op, a, b)
    try:
        return bool({"<": lambda: a < b, "<=": lambda: a <= b, ">": lambda: a > b, ">=": lambda: a >= b}[op]())
    except TypeError:
        raise Unknown() from None


def _struct_eq(a, b):
    if has_top(a) or has_top(b):
        raise Unknown()
    if is_num(a) and is_num(b):
        return cmp("==", a, b)
    if isinstance(a, tuple) and isinstance(b, tuple):
        if len(a) != len(b):
            return False
        return AND(*(_struct_eq(x, y) for x, y in zip(a, b)))
    if is_num(a) or is_num(b):
        # an int tag component against a str/None/tuple: unequal (a number is never a string)
        other = b if is_num(a) else a
        if isinstance(other, float):
            return cmp("==", a if is_num(a) else b, int(other)) if other == int(other) else False
        return False
    return a == b


def predicate(fn, args):
    """Bool term of a tag predicate; raises Unknown on TOP."""
    return _truth(eval_tagfn(fn, list(args)))


def show(tag, env: dict):
    """A concrete rendering of a tag under a model."""
    from .vc import evaluate_term

    if tag is TOP:
        return "<unknown>"
    if isinstance(tag, Sym):
        return evaluate_term(tag, env)
    if isinstance(tag, tuple):
        return tuple(show(x, env) for x in tag)
    return tag


def subst_tag(t, m):
    """`t` with the substitution `m` applied to every symbolic part (tags are nested tuples of Syms/consts)."""
    from tilepy.symbolic import Sym

    from .vc import subst

    if isinstance(t, Sym):
        return subst(t, m)
    if isinstance(t, tuple):
        return tuple(subst_tag(x, m) for x in t)
    return t
