"""Verification conditions: symbolic integers (`tilepy.symbolic.Sym`) and boolean terms turned into pySMT
bit-vector formulas, solved with Z3.

Integers are mathematical integers (linear integer arithmetic; Z3 also takes the rare product of two
variables). `//` and `%` keep Python's floor semantics (the interpreter's) through an exact quotient and
remainder; XOR/AND/OR are exact 32-bit vector operations tied to the integers by bv2nat, so a swizzle in a
query is exact. Every free variable carries a range (see `Ranges`): results hold for tensor dimensions below
2**24 and grids below 2**20 blocks per axis.

Boolean terms are small tuples, built with the helpers below (they fold constants):
``("cmp", op, a, b)``, ``("and", *ts)``, ``("or", *ts)``, ``("not", t)``, ``("bvar", name)``, ``True``,
``False``.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

from pysmt.shortcuts import (
    FALSE,
    GE,
    GT,
    LE,
    LT,
    TRUE,
    And,
    BVAnd,
    BVLShl,
    BVLShr,
    BVOr,
    BVToNatural,
    BVXor,
    Equals,
    Int,
    Minus,
    Not,
    NotEquals,
    Or,
    Plus,
    Solver,
    Symbol,
    Times,
)
from pysmt.typing import BOOL, INT, BVType

from tilepy.symbolic import BinOp, Const, Sym, Var, as_sym, free_vars

WIDTH = 64
MAX_DIM = 1 << 24
MAX_GRID = 1 << 20

CMP = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
       "!=": operator.ne}


# ------------------------------------------------------------------------------------------ bool terms


def is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def const_of(x):
    """The int value of an int or a constant Sym, else None."""
    if is_int(x):
        return x
    if isinstance(x, Const):
        return x.value
    return None


def cmp(op: str, a, b):
    ca, cb = const_of(a), const_of(b)
    if ca is not None and cb is not None:
        return CMP[op](ca, cb)
    if op in ("==", "<=", ">=") and isinstance(a, Sym) and isinstance(b, Sym) and a == b:
        return True
    if op in ("!=", "<", ">") and isinstance(a, Sym) and isinstance(b, Sym) and a == b:
        return False
    return ("cmp", op, as_sym(a), as_sym(b))


def AND(*ts):
    out = []
    for t in ts:
        if t is True:
            continue
        if t is False:
            return False
        if isinstance(t, tuple) and t and t[0] == "and":
            out.extend(t[1:])
        else:
            out.append(t)
    if not out:
        return True
    return out[0] if len(out) == 1 else ("and", *out)


def OR(*ts):
    out = []
    for t in ts:
        if t is False:
            continue
        if t is True:
            return True
        if isinstance(t, tuple) and t and t[0] == "or":
            out.extend(t[1:])
        else:
            out.append(t)
    if not out:
        return False
    return out[0] if len(out) == 1 else ("or", *out)


def NOT(t):
    if t is True:
        return False
    if t is False:
        return True
    if isinstance(t, tuple) and t[0] == "not":
        return t[1]
    return ("not", t)


def in_range(x, lo, hi):
    """lo <= x < hi."""
    return AND(cmp(">=", x, lo), cmp("<", x, hi))


# ------------------------------------------------------------------------------------------ substitution


def subst(e, mapping: dict, memo=None):
    """Replace variables (by name) in a Sym or a bool term; values are Syms or ints. Shared subterms
    (by identity) are rewritten once per call."""
    if not mapping:
        return e
    if memo is None:
        memo = {}
    if isinstance(e, Sym):
        return _subst_sym(e, mapping, memo)
    if isinstance(e, bool) or e is None or is_int(e):
        return e
    if isinstance(e, tuple):
        hit = memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        tag = e[0]
        if tag == "cmp":
            out = cmp(e[1], subst(e[2], mapping, memo), subst(e[3], mapping, memo))
        elif tag == "and":
            out = AND(*(subst(t, mapping, memo) for t in e[1:]))
        elif tag == "or":
            out = OR(*(subst(t, mapping, memo) for t in e[1:]))
        elif tag == "not":
            out = NOT(subst(e[1], mapping, memo))
        elif tag == "bvar":
            new = mapping.get(e[1])
            out = new if new is not None else e
        else:
            return e
        memo[id(e)] = (e, out)
        return out
    return e


def _subst_sym(e: Sym, mapping, memo):
    key = id(e)
    if key in memo:
        return memo[key][1]
    if isinstance(e, Var):
        out = mapping.get(e.name, e)
        out = as_sym(out) if is_int(out) else out
    elif isinstance(e, BinOp):
        a, b = _subst_sym(e.a, mapping, memo), _subst_sym(e.b, mapping, memo)
        out = e if (a is e.a and b is e.b) else _apply(e.op, a, b)
    else:
        out = e
    memo[key] = (e, out)
    return out


def _apply(op, a, b):
    return {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
            "%": operator.mod, "^": operator.xor, "&": operator.and_, "|": operator.or_,
            ">>": operator.rshift, "<<": operator.lshift}[op](a, b)


def term_vars(t) -> set:
    """Names of the integer variables in a Sym or bool term."""
    out: set = set()
    _collect(t, out, set())
    return out


def _collect(t, out, seen):
    if isinstance(t, Sym):
        out.update(v.name for v in free_vars(t))
    elif isinstance(t, tuple) and t:
        if id(t) in seen:  # a subterm shared by identity: visited once
            return
        seen.add(id(t))
        if t[0] == "cmp":
            _collect(t[2], out, seen)
            _collect(t[3], out, seen)
        elif t[0] in ("and", "or", "not"):
            for x in t[1:]:
                _collect(x, out, seen)


def evaluate_term(t, env: dict):
    """Value of a Sym / bool term under `env` (names -> ints); missing names count as 0."""
    if isinstance(t, bool) or t is None or is_int(t):
        return t
    if isinstance(t, Sym):
        from tilepy.symbolic import evaluate

        names = {v.name for v in free_vars(t)}
        return int(evaluate(t, {n: env.get(n, 0) for n in names}))
    tag = t[0]
    if tag == "cmp":
        return CMP[t[1]](evaluate_term(t[2], env), evaluate_term(t[3], env))
    if tag == "and":
        return all(evaluate_term(x, env) for x in t[1:])
    if tag == "or":
        return any(evaluate_term(x, env) for x in t[1:])
    if tag == "not":
        return not evaluate_term(t[1], env)
    if tag == "bvar":
        return bool(env.get(t[1], False))
    raise TypeError(f"not a term: {t!r}")


# ------------------------------------------------------------------------------------------ encoding


@dataclass
class Ranges:
    """Default range of a variable, by the prefix of its name (see domain.py for the naming scheme)."""

    explicit: dict = field(default_factory=dict)

    def of(self, name: str):
        if name in self.explicit:
            return self.explicit[name]
        if name.startswith("block"):
            return (0, MAX_GRID)
        if name.startswith("grid"):
            return (1, MAX_GRID + 1)
        if name.startswith("dim:"):
            return (0, MAX_DIM)
        return (-(1 << 31), 1 << 31)


class Encoder:
    """Sym / bool term -> pySMT formula over integers (linear integer arithmetic for what layouts, loops and
    counters produce). Floor division and modulo by a positive constant introduce an exact quotient and
    remainder (x == c*q + r, 0 <= r < c); XOR/AND/OR (swizzles) are computed exactly on 32-bit vectors
    tied to the integers by bv2nat. Such definitions are side conditions, returned with each term so a
    query asserts exactly the definitions it uses. Remembers the variables it met so a model can be read
    back by name."""

    def __init__(self, ranges: Ranges | None = None):
        self.ranges = ranges or Ranges()
        self.vars: dict[str, object] = {}
        self.bvars: dict[str, object] = {}
        self._memo: dict = {}
        self._bmemo: dict = {}  # id(bool term) -> (term, result)
        self._aux = 0

    def var(self, name: str):
        s = self.vars.get(name)
        if s is None:
            s = self.vars[name] = Symbol("i:" + name, INT)
        return s

    def _fresh(self, kind, typ=None):
        self._aux += 1
        return Symbol(f"aux:{kind}{self._aux}", typ or INT)

    def int(self, e):
        """(term, side conditions) of an integer Sym."""
        if is_int(e):
            return Int(e), frozenset()
        hit = self._memo.get(e)
        if hit is not None:
            return hit
        if isinstance(e, Const):
            out = (Int(e.value), frozenset())
        elif isinstance(e, Var):
            out = (self.var(e.name), frozenset())
        elif isinstance(e, BinOp):
            out = self._binop(e.op, e.a, e.b)
        else:
            raise TypeError(f"cannot encode {e!r}")
        self._memo[e] = out
        return out

    def _binop(self, op, a, b):
        (x, sx), (y, sy) = self.int(a), self.int(b)
        side = sx | sy
        cb = const_of(b)
        if op == "+":
            return Plus(x, y), side
        if op == "-":
            return Minus(x, y), side
        if op == "*":
            return Times(x, y), side
        if op == "<<" and cb is not None:
            return Times(x, Int(1 << cb)), side
        if op == ">>" and cb is not None:
            op, b, cb, y = "//", Const(1 << cb), 1 << cb, Int(1 << cb)
        if op == "&" and cb is not None and cb >= 0 and cb & (cb + 1) == 0:
            op, cb, y = "%", cb + 1, Int(cb + 1)
        if op in ("//", "%"):
            q, r = self._fresh("q"), self._fresh("r")
            if cb is not None and cb > 0:
                defs = And(Equals(x, Plus(Times(Int(cb), q), r)), LE(Int(0), r), LT(r, Int(cb)))
            else:  # a run-time divisor: assumed positive (loop steps, sizes)
                defs = And(Equals(x, Plus(Times(y, q), r)), LE(Int(0), r), LT(r, y), LT(Int(0), y))
            return (q if op == "//" else r), side | {defs}
        if op in ("^", "&", "|", "<<", ">>"):
            bx, by = self._fresh("bv", BVType(32)), self._fresh("bv", BVType(32))
            defs = And(Equals(BVToNatural(bx), x), Equals(BVToNatural(by), y))
            fn = {"^": BVXor, "&": BVAnd, "|": BVOr, "<<": BVLShl, ">>": BVLShr}[op]
            return BVToNatural(fn(bx, by)), side | {defs}
        raise ValueError(op)

    def bool(self, t):
        """(formula, side conditions) of a bool term (memoized by identity: queries share subterms)."""
        if t is True:
            return TRUE(), frozenset()
        if t is False:
            return FALSE(), frozenset()
        hit = self._bmemo.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        out = self._bool(t)
        self._bmemo[id(t)] = (t, out)
        return out

    def _bool(self, t):
        tag = t[0]
        if tag == "cmp":
            op = t[1]
            (a, sa), (b, sb) = self.int(t[2]), self.int(t[3])
            f = {"==": Equals, "!=": NotEquals, "<": LT, "<=": LE, ">": GT, ">=": GE}[op](a, b)
            return f, sa | sb
        if tag in ("and", "or"):
            parts = [self.bool(x) for x in t[1:]]
            side = frozenset().union(*(p[1] for p in parts))
            return (And if tag == "and" else Or)(*(p[0] for p in parts)), side
        if tag == "not":
            f, side = self.bool(t[1])
            return Not(f), side
        if tag == "bvar":
            s = self.bvars.get(t[1])
            if s is None:
                s = self.bvars[t[1]] = Symbol("b:" + t[1], BOOL)
            return s, frozenset()
        raise TypeError(f"not a bool term: {t!r}")

    def formula(self, t):
        f, side = self.bool(t)
        return And(f, *side) if side else f

    def range_conditions(self, names):
        out = []
        for n in names:
            lo, hi = self.ranges.of(n)
            out.append(AND(cmp(">=", Var(n), lo), cmp("<", Var(n), hi)))
        return AND(*out)


class Solver_:
    """One Z3 solver (through pySMT) for a whole verification run, with a cache of answers keyed by the
    formula (pySMT formulas are hash-consed, so equal queries are the same object)."""

    def __init__(self, ranges: Ranges | None = None):
        self.enc = Encoder(ranges)
        self.solver = Solver(name="z3")
        self.cache: dict = {}
        self.queries = 0
        self.facts: dict = {}  # variable name -> a term defining it (trip counts), added when it occurs

    def check(self, term, want_vars=(), small=True) -> dict | None:
        """A model (name -> int, plus bool vars) of `term` together with the ranges of its variables, or
        None when it is unsatisfiable. `small=False`: any model (a yes/no question, no counterexample)."""
        if term is False:
            return None
        names = term_vars(term)
        extra = []
        todo = [n for n in names if n in self.facts]
        done = set()
        while todo:
            n = todo.pop()
            if n in done:
                continue
            done.add(n)
            extra.append(self.facts[n])
            for v in term_vars(self.facts[n]) - names:
                names.add(v)
                if v in self.facts:
                    todo.append(v)
        term = AND(term, *extra)
        full = AND(self.enc.range_conditions(sorted(names)), term)
        if full is False:
            return None
        formula = self.enc.formula(full)
        if formula in self.cache:
            return self.cache[formula]
        self.queries += 1
        self.solver.push()
        try:
            self.solver.add_assertion(formula)
            if not self.solver.solve():
                model = None
            else:
                model = {}
                for n in names | set(want_vars):
                    if n in self.enc.vars:
                        v = self.solver.get_value(self.enc.vars[n]).constant_value()
                        model[n] = int(v)
                for n, s in self.enc.bvars.items():
                    try:
                        model["?" + n] = bool(self.solver.get_value(s).is_true())
                    except Exception:  # noqa: BLE001 - a bool var not in this query
                        pass
        finally:
            self.solver.pop()
        if model is not None and small:
            model = self._small(formula, names, want_vars) or model
        self.cache[formula] = model
        return model

    def _small(self, formula, names, want_vars):
        """A model with small blocks, sizes and iterations, so a counterexample replays on a small launch."""
        keys = [n for n in names if n.startswith(("block", "dim:", "p:", "grid")) or "#" in n]
        if not keys:
            return None
        for bound in (2, 4, 16, 64, 256, 1024):
            conds = AND(*(AND(cmp(">=", Var(n), -bound), cmp("<=", Var(n), bound)) for n in keys),
                        *(cmp("<=", Var(n), bound) for n in keys if n.startswith("dim:")))
            self.solver.push()
            try:
                self.solver.add_assertion(formula)
                self.solver.add_assertion(self.enc.formula(conds))
                if self.solver.solve():
                    model = {}
                    for n in names | set(want_vars):
                        if n in self.enc.vars:
                            model[n] = int(self.solver.get_value(self.enc.vars[n]).constant_value())
                    return model
            finally:
                self.solver.pop()
        return None

    def close(self):
        self.solver.exit()


