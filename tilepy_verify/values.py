"""Operations on the verifier's abstract values (events.py): scalar arithmetic on symbolic terms, joining
two values where control flow merges, a value seen after its loop, the fold of a loop-carried accumulator, the
tags of MMA results, tags composed through coordinate maps."""

from __future__ import annotations

import numpy as np

from tilepy.symbolic import Sym

from .events import UNKNOWN, GView, Loop, Reg, SRef, TensorVal, fresh, intlike
from .tagterms import TOP, Alt, Unknown, eval_tagfn, product, subst_tag
from .vc import AND, NOT, OR, cmp, const_of, in_range, is_int, subst, term_vars


def untagged(c):
    return [Alt(True, None)]


def tagfn_tag(fn, span):
    def tag(c):
        try:
            return [Alt(True, eval_tagfn(fn, list(c)), span)]
        except Unknown:
            return [Alt(True, TOP, span)]

    return tag


def compose(tag, f):
    if tag is None:
        return None
    return lambda c: tag(f(c))


def compose_v(value, f):
    if value is None:
        return None
    return lambda c: value(f(c))


def value_names(v) -> set:
    if v is UNKNOWN or isinstance(v, bool) or v is None or not (isinstance(v, (Sym, tuple)) or is_int(v)):
        return set()
    return term_vars(v)


def same_value(a, b) -> bool:
    if is_int(a) and is_int(b):
        return a == b
    return isinstance(a, Sym) and isinstance(b, Sym) and a == b


def scalar_op(op, a, b):
    if a is UNKNOWN or b is UNKNOWN:
        return UNKNOWN
    boolish = (isinstance(a, bool) or (isinstance(a, tuple) and a and a[0] in ("cmp", "and", "or", "not", "bvar")),
               isinstance(b, bool) or (isinstance(b, tuple) and b and b[0] in ("cmp", "and", "or", "not", "bvar")))
    if op in ("and", "&") and all(boolish):
        return AND(a, b)
    if op in ("or", "|") and all(boolish):
        return OR(a, b)
    if any(boolish):
        if op in ("==", "!=") and all(boolish):
            eq = OR(AND(a, b), AND(NOT(a), NOT(b)))
            return eq if op == "==" else NOT(eq)
        return UNKNOWN
    if not (intlike(a) and intlike(b)):
        return UNKNOWN
    if op in ("<", "<=", ">", ">=", "==", "!="):
        return cmp(op, a, b)
    if op in ("+", "-", "*", "//", "%", "^", "&", "|", "<<", ">>"):
        cb = const_of(b)
        if op in ("//", "%") and cb is not None and cb <= 0:
            return UNKNOWN
        # a run-time divisor stays symbolic: vc.py encodes floor division exactly for either sign (and leaves
        # the quotient free where the divisor is 0, where the kernel would fail)
        if op in ("<<", ">>") and (cb is None or cb < 0):
            return fresh("shift")
        import operator

        return {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
                "%": operator.mod, "^": operator.xor, "&": operator.and_, "|": operator.or_,
                "<<": operator.lshift, ">>": operator.rshift}[op](a, b)
    return UNKNOWN


def scalar_minmax(op, a, b):
    """min (op "min") or max (op "max") of two scalars when it is a term already: both constant, or equal;
    UNKNOWN for a non-integer; None when it takes a fresh variable with facts (the walker's `_minmax`)."""
    if a is UNKNOWN or b is UNKNOWN or not (intlike(a) and intlike(b)):
        return UNKNOWN
    ca, cb = const_of(a), const_of(b)
    if ca is not None and cb is not None:
        return min(ca, cb) if op == "min" else max(ca, cb)
    if same_value(a, b):
        return a
    return None


def intersect(threads, ids):
    if threads is None:
        return ids
    return np.intersect1d(threads, ids)


def join(a, b):
    """Value of a variable after control flow merges two possible values."""
    if a is b:
        return a
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, Reg) and isinstance(b, Reg):
        pairs = tuple(a.pairs) + tuple(p for p in b.pairs if all(p.op is not q.op for q in a.pairs))
        if pairs and all(r.from_pairs or (r.tag is None and not r.pairs) for r in (a, b)):
            # MMA results (or an untagged initial accumulator): the products of every MMA that produced it
            return Reg(b.type, mma_result_tag(pairs), None, pairs, b.src, True)
        tag = a.tag if a.tag is b.tag else (None if a.tag is None and b.tag is None else top_tag)
        return Reg(b.type, tag, None, pairs, b.src)
    if same_value(a, b):
        return a
    if isinstance(a, (SRef, GView, TensorVal)):
        return b
    return fresh("join")


def top_tag(c):
    return [Alt(True, TOP)]


def mma_result_tag(pairs):
    """Tag of an MMA result: element (i, j) carries (A tag at (i, r), B tag at (r, j)) for every contraction
    index r of every MMA in `pairs` that accumulated into it, at any of its iterations (each MMA's loop
    variables are fresh, constrained to their ranges). The accumulator's contents before the first of them
    are not part of it. Operands are taken by their logical coordinates (a register operand in another
    layout than the instruction's is an mma_layout error of its own)."""

    def tag(c, pairs=pairs):
        out = []
        for p in pairs:
            m = {}
            for lp in p.point.loops:
                m[lp.var.name], m[lp.trip.name] = fresh(lp.name), fresh("trip")
            out += products(p, c, m, p.point.constraint())
        return out

    return tag


def products(p, c, m, where):
    i, j = c
    r = fresh("r")
    where = AND(in_range(r, 0, p.shape[2]), subst(where, m) if m else where)
    out = []
    for alt in product([p.a.tag((i, r)), p.b.tag((r, j))], tuple):
        cond = AND(where, subst(alt.cond, m) if m else alt.cond)
        if cond is not False:
            out.append(Alt(cond, subst_tag(alt.tag, m) if m else alt.tag, alt.src or p.span))
    return out


def products_tag(contrib, prev):
    """Tag of the result of one MMA where it is computed: its own products at this iteration, then those of
    the MMAs that produced the accumulator it added to (`prev`)."""

    def tag(c, contrib=contrib, prev=prev):
        return products(contrib, c, {}, True) + (prev(c) if prev is not None else [])

    return tag


def after_loop(v, lp: Loop):
    """A value computed in a loop body, seen after the loop: its iteration is some valid one."""
    if isinstance(v, Reg) and v.tag is not None:
        inner = v.tag

        def tag(c, inner=inner, lp=lp):
            k = fresh(lp.name)
            m = {lp.var.name: k}
            return [Alt(AND(subst(a.cond, m), subst(lp.constraint(), m)), subst_tag(a.tag, m), a.src)
                    for a in inner(c)]

        return Reg(v.type, tag, None, v.pairs, v.src, v.from_pairs)
    if isinstance(v, Sym) and lp.var.name in term_vars(v):  # (a Select's condition included)
        return fresh("after")
    return v


def foldable(v0, v1, joined) -> bool:
    """Whether a loop-carried value is an accumulator `fold` summarizes: a register tile whose tag changes in
    the body (`join` of its value before the loop and after one iteration lost the tag), not an MMA result."""
    return (isinstance(v0, Reg) and isinstance(v1, Reg) and isinstance(joined, Reg) and joined.tag is top_tag
            and not joined.pairs)


def fold(v0, v1, lp: Loop, after: bool):
    """The tag of an accumulator carried through loop `lp` (`acc = f(acc, x)`), a loop summary instead of an
    unknown tag. Element c is ("fold", n, k, t) for each iteration k in [0, n) that folded into it, t the tag
    of the body's result at iteration k with every carried value in it read as its value before the loop
    (`v1`: the first pass's walk of one iteration), and ("fold", n, None, t0) for each alternative t0 of its
    value before the loop (`v0`). n is the number of iterations folded: at the top of the body the iteration
    index, after the loop the trip count. So an assertion states which elements each iteration combines
    (through k) and how many iterations there were (n): a reduction over chunks proves that every chunk is
    read, the last one included, and that the chunks cover the range."""
    t0 = v0.tag if v0.tag is not None else untagged
    t1 = v1.tag if v1.tag is not None else untagged

    def tag(c, t0=t0, t1=t1, lp=lp, after=after):
        n = lp.trip if after else lp.index()
        k = fresh(f"{lp.name}.fold")
        m = {lp.var.name: lp.start + k * lp.step}
        live = AND(cmp(">=", k, 0), cmp("<", k, n))
        out = [Alt(a.cond, ("fold", n, None, a.tag), a.src) for a in t0(c)]
        out += [Alt(AND(live, subst(a.cond, m)), ("fold", n, k, subst_tag(a.tag, m)), a.src) for a in t1(c)]
        return out

    return Reg(v1.type, tag, None, (), v1.src)
