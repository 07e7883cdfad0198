"""Verification conditions: symbolic integers (`tilepy.symbolic.Sym`) and boolean terms turned into pySMT
bit-vector formulas, solved with Z3.

Integers are 64-bit two's-complement bit-vectors. `//` and `%` keep Python's floor semantics (the
interpreter's), encoded with signed division and a correction; XOR/AND/OR/shifts are exact, so swizzles are
exact. Every free variable carries a range (see `Ranges`) small enough that no term overflows 64 bits: the
verifier's results hold for tensors below 2**24 elements per dimension and grids below 2**20 blocks per
axis.

Boolean terms are small tuples, built with the helpers below (they fold constants):
``("cmp", op, a, b)``, ``("and", *ts)``, ``("or", *ts)``, ``("not", t)``, ``("bvar", name)``, ``True``,
``False``.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

from pysmt.shortcuts import (
    BV, And, BVAdd, BVAnd, BVLShl, BVMul, BVNeg, BVOr, BVSDiv, BVSLE, BVSLT, BVSRem, BVSub, BVXor, BVAShr,
    Equals, FALSE, Iff, Ite, Not, NotEquals, Or, Solver, Symbol, TRUE, get_env,
)
from pysmt.typing import BOOL, BVType

from tilepy.symbolic import BinOp, Const, Sym, Var, as_sym, free_vars

WIDTH = 64
BV64 = BVType(WIDTH)
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


def subst(e, mapping: dict):
    """Replace variables (by name) in a Sym or a bool term; values are Syms or ints."""
    if not mapping:
        return e
    if isinstance(e, Sym):
        return _subst_sym(e, mapping, {})
    if isinstance(e, bool) or e is None or is_int(e):
        return e
    if isinstance(e, tuple):
        tag = e[0]
        if tag == "cmp":
            return cmp(e[1], subst(e[2], mapping), subst(e[3], mapping))
        if tag == "and":
            return AND(*(subst(t, mapping) for t in e[1:]))
        if tag == "or":
            return OR(*(subst(t, mapping) for t in e[1:]))
        if tag == "not":
            return NOT(subst(e[1], mapping))
        if tag == "bvar":
            new = mapping.get(e[1])
            return new if new is not None else e
    return e


def _subst_sym(e: Sym, mapping, memo):
    key = id(e)
    if key in memo:
        return memo[key]
    if isinstance(e, Var):
        out = mapping.get(e.name, e)
        out = as_sym(out) if is_int(out) else out
    elif isinstance(e, BinOp):
        a, b = _subst_sym(e.a, mapping, memo), _subst_sym(e.b, mapping, memo)
        out = e if (a is e.a and b is e.b) else _apply(e.op, a, b)
    else:
        out = e
    memo[key] = out
    return out


def _apply(op, a, b):
    return {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
            "%": operator.mod, "^": operator.xor, "&": operator.and_, "|": operator.or_,
            ">>": operator.rshift, "<<": operator.lshift}[op](a, b)


def term_vars(t) -> set:
    """Names of the integer variables in a Sym or bool term."""
    out: set = set()
    _collect(t, out)
    return out


def _collect(t, out):
    if isinstance(t, Sym):
        out.update(v.name for v in free_vars(t))
    elif isinstance(t, tuple) and t:
        if t[0] == "cmp":
            _collect(t[2], out)
            _collect(t[3], out)
        elif t[0] in ("and", "or", "not"):
            for x in t[1:]:
                _collect(x, out)


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
    """Sym / bool term -> pySMT formula; remembers the variables it met (their ranges become side
    conditions) so a model can be read back by name."""

    def __init__(self, ranges: Ranges | None = None):
        self.ranges = ranges or Ranges()
        self.mgr = get_env().formula_manager
        self.vars: dict[str, object] = {}
        self.bvars: dict[str, object] = {}
        self._memo: dict = {}

    def var(self, name: str):
        s = self.vars.get(name)
        if s is None:
            s = self.vars[name] = Symbol("i:" + name, BV64)
        return s

    def int(self, e):
        if is_int(e):
            return BV(e % (1 << WIDTH), WIDTH)
        key = e
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        if isinstance(e, Const):
            out = BV(e.value % (1 << WIDTH), WIDTH)
        elif isinstance(e, Var):
            out = self.var(e.name)
        elif isinstance(e, BinOp):
            out = self._binop(e.op, e.a, e.b)
        else:
            raise TypeError(f"cannot encode {e!r}")
        self._memo[key] = out
        return out

    def _binop(self, op, a, b):
        x, y = self.int(a), self.int(b)
        if op == "+":
            return BVAdd(x, y)
        if op == "-":
            return BVSub(x, y)
        if op == "*":
            return BVMul(x, y)
        if op == "^":
            return BVXor(x, y)
        if op == "&":
            return BVAnd(x, y)
        if op == "|":
            return BVOr(x, y)
        if op == "<<":
            return BVLShl(x, y)
        if op == ">>":
            return BVAShr(x, y)
        zero = BV(0, WIDTH)
        q, r = BVSDiv(x, y), BVSRem(x, y)
        # floor semantics: when the remainder's sign differs from the divisor's, adjust by one step.
        fix = And(NotEquals(r, zero), Not(Iff(BVSLT(r, zero), BVSLT(y, zero))))
        if op == "//":
            return Ite(fix, BVSub(q, BV(1, WIDTH)), q)
        if op == "%":
            return Ite(fix, BVAdd(r, y), r)
        raise ValueError(op)

    def bool(self, t):
        if t is True:
            return TRUE()
        if t is False:
            return FALSE()
        tag = t[0]
        if tag == "cmp":
            op, a, b = t[1], self.int(t[2]), self.int(t[3])
            if op == "==":
                return Equals(a, b)
            if op == "!=":
                return NotEquals(a, b)
            if op == "<":
                return BVSLT(a, b)
            if op == "<=":
                return BVSLE(a, b)
            if op == ">":
                return BVSLT(b, a)
            if op == ">=":
                return BVSLE(b, a)
        if tag == "and":
            return And(*(self.bool(x) for x in t[1:]))
        if tag == "or":
            return Or(*(self.bool(x) for x in t[1:]))
        if tag == "not":
            return Not(self.bool(t[1]))
        if tag == "bvar":
            s = self.bvars.get(t[1])
            if s is None:
                s = self.bvars[t[1]] = Symbol("b:" + t[1], BOOL)
            return s
        raise TypeError(f"not a bool term: {t!r}")

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

    def check(self, term, want_vars=()) -> dict | None:
        """A model (name -> int, plus bool vars) of `term` together with the ranges of its variables, or
        None when it is unsatisfiable."""
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
        formula = self.enc.bool(full)
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
                        v = self.solver.get_value(self.enc.vars[n]).bv_signed_value()
                        model[n] = int(v)
                for n, s in self.enc.bvars.items():
                    try:
                        model["?" + n] = bool(self.solver.get_value(s).is_true())
                    except Exception:  # noqa: BLE001 - a bool var not in this query
                        pass
        finally:
            self.solver.pop()
        if model is not None:
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
                self.solver.add_assertion(self.enc.bool(conds))
                if self.solver.solve():
                    model = {}
                    for n in names | set(want_vars):
                        if n in self.enc.vars:
                            model[n] = int(self.solver.get_value(self.enc.vars[n]).bv_signed_value())
                    return model
            finally:
                self.solver.pop()
        return None

    def close(self):
        self.solver.exit()


_ = (BVNeg, Symbol)
