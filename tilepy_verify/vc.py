"""Verification conditions: symbolic integers (`tilepy.symbolic.Sym`) and boolean terms turned into Z3
formulas (integers, with bit-vectors for bitwise operations), solved with Z3.

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
import os
import time
from dataclasses import dataclass, field

import z3

from tilepy.symbolic import BinOp, Const, Sym, Var, as_sym

WIDTH = 64
MAX_DIM = 1 << 24
MAX_GRID = 1 << 20

# Solver budgets (Solver_): every budget that steers the analysis (how long a try runs before concrete sizes are
# tried, the small-model search, tickets' and coverage's quick checks, the query itself) is a Z3 resource limit
# ("rlimit": Z3's count of its own steps, set per check), so the same kernel gets the same answers on any machine
# and load (for one Z3 version). On the 2-core sandbox Z3 spends 0.2-10 million units a second, about 3M on most
# queries. The one wall-clock limit is a last-resort safety net per solver check. The values below are calibrated
# on every current kernel and test (docs/verification.md, "Solver budgets").
QUERY_TIMEOUT_ENV = "TILEPY_VERIFY_QUERY_TIMEOUT"
DEFAULT_QUERY_TIMEOUT_S = 300.0  # the safety net: the query budget below lasts under 2 min even at 0.13M a second
QUERY_RLIMIT_ENV = "TILEPY_VERIFY_QUERY_RLIMIT"
# a query's whole budget: the largest query a current kernel settles past its first try spent 11-18M (the stream-K
# ticket tests' nonlinear races, at 0.5-1.4M a second)
DEFAULT_QUERY_RLIMIT = 20_000_000
# the search for a small counterexample (an optional refinement), per bound: the largest one settled 5M
SMALL_MODEL_RLIMIT = 6_000_000

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


class Select(Sym):
    """`a if cond else b` of two integers under a bool term (`tp.where`, a conditional expression on uniform
    scalars): a term, like min / max, so it keeps its meaning under a negation and renames with its arguments
    in every instance of a point (a fresh value with its facts in the path condition did neither). The encoder
    makes it Z3's if-then-else."""

    __slots__ = ("cond", "a", "b", "_hash")

    def __init__(self, cond, a, b):
        object.__setattr__(self, "cond", cond)
        object.__setattr__(self, "a", as_sym(a))
        object.__setattr__(self, "b", as_sym(b))
        object.__setattr__(self, "_hash", hash(("Select", cond, self.a, self.b)))

    def __eq__(self, other):
        return (isinstance(other, Select) and self._hash == other._hash and self.a == other.a and self.b == other.b
                and self.cond == other.cond)

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return f"Select({self.cond!r}, {self.a!r}, {self.b!r})"

    def __str__(self):
        return f"({self.a} if {self.cond} else {self.b})"


def select(cond, a, b):
    """`a if cond else b` (folded when the condition is constant or both sides are equal)."""
    if cond is True or cond is False:
        return a if cond else b
    if (is_int(a) or isinstance(a, Sym)) and (is_int(b) or isinstance(b, Sym)) and as_sym(a) == as_sym(b):
        return a
    return Select(cond, a, b)


# ------------------------------------------------------------------------------------------ substitution


# Substitution is pure, and the checks rename the same terms with the same few variables over and over (a
# point's path and time under each instance's suffix): one memo per distinct mapping, kept across calls, so a
# repeated renaming returns the very object it returned before (and the encoder and the solver's cache, keyed
# by identity, answer it at once). Memos hold their terms, so an id is never reused while its entry lives; all
# are dropped when a verification run ends (drop_memos) or hold more than _MEMO_MAX entries together.
_MEMOS: dict = {}
_MEMO_MAX = 1 << 19
_memo_size = [0]
# Names of the variables in a Sym or bool term, by identity (holding the term).
_NAMES: dict = {}
_EMPTY = frozenset()


def _names(t) -> frozenset:
    """Names of the integer variables in a Sym or bool term (cached per object)."""
    hit = _NAMES.get(id(t))
    if hit is not None and hit[0] is t:
        return hit[1]
    if isinstance(t, Var):
        out = frozenset((t.name,))
    elif isinstance(t, BinOp):
        a, b = _names(t.a), _names(t.b)
        out = a if b <= a else b if a <= b else a | b
    elif isinstance(t, Select):
        out = _names(t.cond) | _names(t.a) | _names(t.b)
    elif not (isinstance(t, tuple) and t):
        return _EMPTY
    elif t[0] == "cmp":
        a, b = _names(t[2]), _names(t[3])
        out = a if b <= a else b if a <= b else a | b
    elif t[0] in ("and", "or", "not"):
        kids = []
        for x in t[1:]:  # the cache inline: most children are shared subterms seen before
            h = _NAMES.get(id(x))
            kids.append(h[1] if h is not None and h[0] is x else _names(x))
        out = kids[0] if len(kids) == 1 else _EMPTY.union(*kids) if kids else _EMPTY
    else:
        out = _EMPTY
    if len(_NAMES) > _MEMO_MAX:
        _NAMES.clear()
    _NAMES[id(t)] = (t, out)
    return out


def drop_memos():
    """Drop the substitution memos and the name cache. `verify_ir` calls it when a run ends: the terms of one
    kernel are not those of the next, so carrying them over only grows the process (a long-lived agent, a test
    worker) until a wholesale drop costs a second inside some later run."""
    _MEMOS.clear()
    _NAMES.clear()
    _memo_size[0] = 0


def _memo_for(mapping):
    try:
        key = frozenset(mapping.items())
    except TypeError:  # an unhashable value: a memo for this call only
        return {}
    memo = _MEMOS.get(key)
    if memo is None:
        if _memo_size[0] > _MEMO_MAX:
            _MEMOS.clear()
            _memo_size[0] = 0
        memo = _MEMOS[key] = {}
    return memo


def subst(e, mapping: dict, memo=None):
    """Replace variables (by name) in a Sym or a bool term; values are Syms or ints. Shared subterms
    (by identity) are rewritten once, and a term renamed again with an equal mapping gives the same object
    (see _MEMOS); a subterm naming none of the replaced variables is returned as it is."""
    if not mapping:
        return e
    if memo is None:
        if isinstance(e, bool) or e is None or is_int(e) or isinstance(e, Const):
            return e
        memo = _memo_for(mapping)
        before = len(memo)
        out = _subst(e, mapping, memo)
        _memo_size[0] += len(memo) - before
        return out
    return _subst(e, mapping, memo)


def _subst(e, mapping, memo):
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
            if _names(e).isdisjoint(mapping):
                out = e
            else:
                out = cmp(e[1], _subst_sym(as_sym(e[2]), mapping, memo), _subst_sym(as_sym(e[3]), mapping, memo))
        elif tag in ("and", "or", "not"):
            kids = []
            for x in e[1:]:  # the memo inline: shared subterms are renamed once
                h = memo.get(id(x))
                kids.append(h[1] if h is not None and h[0] is x else _subst(x, mapping, memo))
            if all(k is t for k, t in zip(kids, e[1:])):
                out = e
            elif tag == "and":
                out = AND(*kids)
            elif tag == "or":
                out = OR(*kids)
            else:
                out = NOT(kids[0])
        elif tag == "bvar":
            new = mapping.get(e[1])
            out = new if new is not None else e
        else:
            return e
        memo[id(e)] = (e, out)
        return out
    return e


def _subst_sym(e: Sym, mapping, memo):
    if isinstance(e, Const):
        return e
    hit = memo.get(id(e))
    if hit is not None and hit[0] is e:
        return hit[1]
    if isinstance(e, Var):
        out = mapping.get(e.name, e)
        out = as_sym(out) if is_int(out) else out
    elif isinstance(e, BinOp):
        if _names(e).isdisjoint(mapping):
            out = e
        else:
            a, b = _subst_sym(e.a, mapping, memo), _subst_sym(e.b, mapping, memo)
            out = e if (a is e.a and b is e.b) else _apply(e.op, a, b)
    elif isinstance(e, Select):
        if _names(e).isdisjoint(mapping):
            out = e
        else:
            c, a, b = _subst(e.cond, mapping, memo), _subst_sym(e.a, mapping, memo), _subst_sym(e.b, mapping, memo)
            out = e if (c is e.cond and a is e.a and b is e.b) else select(c, a, b)
    else:
        out = e
    memo[id(e)] = (e, out)
    return out


def linear_form(e):
    """{atom: coef, 1: const} of an integer term (sums and constant multiples flattened), or None."""
    out: dict = {}

    def go(x, k):
        c = const_of(x)
        if c is not None:
            out[1] = out.get(1, 0) + k * c
            return True
        if isinstance(x, BinOp) and x.op in ("+", "-"):
            return go(x.a, k) and go(x.b, k if x.op == "+" else -k)
        if isinstance(x, BinOp) and x.op == "*" and (const_of(x.a) is not None or const_of(x.b) is not None):
            ca = const_of(x.a)
            return go(x.b, k * ca) if ca is not None else go(x.a, k * const_of(x.b))
        if isinstance(x, Sym):
            out[x] = out.get(x, 0) + k
            return True
        return False

    if not go(as_sym(e) if is_int(e) else e, 1):
        return None
    return {a: c for a, c in out.items() if c or a == 1}


def build_linear(lin):
    out = as_sym(lin.get(1, 0))
    for a, c in lin.items():
        if a != 1 and c:
            out = out + a * c
    return out


def period_lower(R):
    """c where R is max(y, c) with a constant c >= 1 (a flattened ring's slots per tile), else None."""
    if isinstance(R, BinOp) and R.op == "max":
        cs = [c for c in (const_of(R.a), const_of(R.b)) if c is not None and c >= 1]
        return max(cs) if cs else None
    return None


def div_period(op, x, R):
    """x // R or x % R for a run-time divisor R >= c >= 1 (`period_lower`), exact: the multiples of R in x's
    linear form taken out (x = rest + W R: x // R = rest // R + W, x % R = rest % R), a constant rest in
    [-c, c) folded, floor taken into max / min. An instance of a slot loop's iteration v0 + m R (sync.py,
    periodic.py) then has the tile and round of v0 plus m, terms the solver needs no nonlinear search for."""
    lo = period_lower(R)
    if op == "//" and isinstance(x, BinOp) and x.op in ("max", "min"):
        return _apply(x.op, div_period(op, x.a, R), div_period(op, x.b, R))
    lin = linear_form(x)
    if lin is None:
        return BinOp(op, as_sym(x), R)
    whole = 0
    for a in list(lin):
        if a == R:
            whole = whole + lin.pop(a)
        elif isinstance(a, BinOp) and a.op == "*" and R in (a.a, a.b):
            whole = whole + (a.b if a.a == R else a.a) * lin.pop(a)
    rest = build_linear(lin)
    c = const_of(rest)
    if c is not None and 0 <= c < lo:
        q, r = 0, as_sym(c)
    elif c is not None and -lo <= c < 0:
        q, r = -1, R + c
    else:
        if const_of(whole) == 0:
            return BinOp(op, as_sym(x), R)
        q, r = BinOp("//", as_sym(rest), R), BinOp("%", as_sym(rest), R)
    return as_sym(q + whole) if op == "//" else as_sym(r)


def _apply(op, a, b):
    if op in ("//", "%") and isinstance(b, BinOp) and b.op == "max" and period_lower(b) is not None:
        return div_period(op, a, b)
    if op in ("min", "max"):
        ca, cb = const_of(a), const_of(b)
        if ca is not None and cb is not None:
            return min(ca, cb) if op == "min" else max(ca, cb)
        return a if as_sym(a) == as_sym(b) else BinOp(op, as_sym(a), as_sym(b))
    return {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
            "%": operator.mod, "^": operator.xor, "&": operator.and_, "|": operator.or_,
            ">>": operator.rshift, "<<": operator.lshift}[op](a, b)


def term_vars(t) -> set:
    """Names of the integer variables in a Sym or bool term (a fresh set)."""
    return set(_names(t))


def evaluate_term(t, env: dict):
    """Value of a Sym / bool term under `env` (names -> ints); missing names count as 0."""
    if isinstance(t, bool) or t is None or is_int(t):
        return t
    if isinstance(t, Sym):
        from tilepy.symbolic import evaluate

        names = _names(t)
        try:
            return int(evaluate(t, {n: env.get(n, 0) for n in names}))
        except ZeroDivisionError:  # a run-time divisor that is 0 in the model (its quotient is free there)
            return _evaluate_total(t, env)
        except TypeError:  # a Select inside (tilepy.symbolic does not know it)
            return _evaluate_total(t, env)
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


def _evaluate_total(e, env: dict) -> int:
    """A Sym's value with x // 0 = 0 and x % 0 = x (the encoding leaves them free: any value is one of the
    model's), for reading a counterexample back."""
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Var):
        return int(env.get(e.name, 0))
    if isinstance(e, Select):
        return _evaluate_total(e.a if evaluate_term(e.cond, env) else e.b, env)
    a, b = _evaluate_total(e.a, env), _evaluate_total(e.b, env)
    if b == 0 and e.op in ("//", "%"):
        return 0 if e.op == "//" else a
    return _apply(e.op, a, b)


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


class _Lib:
    """Z3's C functions without the Python layer's error check after each call (z3core wraps each in an
    `Elementaries` holding the raw ctypes function; a term Z3 refuses comes back as NULL, see _Z3.keep)."""

    def __getattr__(self, name):
        f = getattr(z3.z3core, name).__defaults__[-1].f
        setattr(self, name, f)
        return f


_ARRAYS: dict = {}  # n -> the ctypes type of n Z3 terms


class _Z3:
    """Z3 terms made through its C API (one context per verification run): every term is kept (reference
    counted once, freed with the context), so a term is its pointer and equal terms are one pointer (Z3
    hash-conses them). The Python layer's per-call checks and wrapper objects cost more than the solving
    for the many small formulas the checks ask."""

    _shared = None  # (context, sorts): one Z3 context for all runs (making one costs ~30 ms)

    def __init__(self):
        if _Z3._shared is None:
            ctx = z3.Context()
            _Z3._shared = (ctx, z3.IntSort(ctx), z3.BoolSort(ctx), z3.BitVecSort(32, ctx))
        self.ctx, self._int, self._bool, self._bv = _Z3._shared
        self.c = self.ctx.ref()
        self.lib = _lib = _Lib()
        self._inc = _lib.Z3_inc_ref
        self._kept: list = []
        self._nary: dict = {}
        self.true = self.keep(_lib.Z3_mk_true(self.c))
        self.false = self.keep(_lib.Z3_mk_false(self.c))

    def keep(self, a):
        if a is None or not a.value:
            code = z3.z3core.Z3_get_error_code(self.c)
            raise RuntimeError(f"Z3 refused a term: {z3.z3core.Z3_get_error_msg(self.c, code)}")
        self._inc(self.c, a)
        self._kept.append(a)
        return a

    def release(self):
        """Drop this run's references (Z3 frees the terms no other run holds)."""
        dec, c = self.lib.Z3_dec_ref, self.c
        for a in self._kept:
            dec(c, a)
        self._kept = []
        self._nary = {}

    def __del__(self):
        if getattr(self, "_kept", None):
            try:
                self.release()
            except Exception:  # noqa: BLE001 - at interpreter exit Z3 may be gone already
                pass

    def const(self, name, sort):
        sym = self.lib.Z3_mk_string_symbol(self.c, name.encode())
        return self.keep(self.lib.Z3_mk_const(self.c, sym, {"int": self._int, "bool": self._bool,
                                                              "bv": self._bv}[sort].ast))

    def num(self, v):
        return self.keep(self.lib.Z3_mk_numeral(self.c, str(int(v)).encode(), self._int.ast))

    def nary(self, fn, args):
        key = (id(fn), *(a.value for a in args))  # equal operands: the term made before (Z3 would return it too)
        hit = self._nary.get(key)
        if hit is None:
            n = len(args)
            arr = _ARRAYS.get(n)
            if arr is None:
                arr = _ARRAYS[n] = z3.z3core.Ast * n
            hit = self._nary[key] = self.keep(fn(self.c, n, arr(*args)))
        return hit

    def add(self, a, b):
        return self.nary(self.lib.Z3_mk_add, (a, b))

    def ite(self, c, a, b):
        key = ("ite", c.value, a.value, b.value)
        hit = self._nary.get(key)
        if hit is None:
            hit = self._nary[key] = self.keep(self.lib.Z3_mk_ite(self.c, c, a, b))
        return hit

    def sub(self, a, b):
        return self.nary(self.lib.Z3_mk_sub, (a, b))

    def mul(self, a, b):
        return self.nary(self.lib.Z3_mk_mul, (a, b))

    def and_(self, *args):
        return args[0] if len(args) == 1 else self.true if not args else self.nary(self.lib.Z3_mk_and, args)

    def or_(self, *args):
        return args[0] if len(args) == 1 else self.false if not args else self.nary(self.lib.Z3_mk_or, args)

    def not_(self, a):
        return self.keep(self.lib.Z3_mk_not(self.c, a))

    def cmp(self, op, a, b):
        lib = self.lib
        if op == "!=":
            return self.not_(self.keep(lib.Z3_mk_eq(self.c, a, b)))
        fn = {"<": lib.Z3_mk_lt, "<=": lib.Z3_mk_le, ">": lib.Z3_mk_gt, ">=": lib.Z3_mk_ge, "==": lib.Z3_mk_eq}[op]
        return self.keep(fn(self.c, a, b))

    def bv2int(self, a):
        return self.keep(self.lib.Z3_mk_bv2int(self.c, a, False))

    def bvop(self, op, a, b):
        lib = self.lib
        fn = {"^": lib.Z3_mk_bvxor, "&": lib.Z3_mk_bvand, "|": lib.Z3_mk_bvor, "<<": lib.Z3_mk_bvshl,
              ">>": lib.Z3_mk_bvlshr}[op]
        return self.keep(fn(self.c, a, b))

    def expr(self, a):
        """A z3py expression for a term (for the solver and models)."""
        return z3.ExprRef(a, self.ctx)


# a query not settled within FIRST_TRY_RLIMIT is tried with concrete sizes (Solver_._answer). Of the 66000 first
# tries of the stdlib kernels, corpora and tests 8 settled past 1.5M (up to 4.7M; they now go on to the seeded tries
# and the rest of the query, the same answer); a higher budget only waits longer on the queries that need seeds
# (their nonlinear search runs at 0.1-1M units a second: 5M cost the stream-K ticket tests minutes)
FIRST_TRY_RLIMIT = 1_500_000
SEED_TRY_RLIMIT = 300_000  # the seeded tries that settle: 1k-0.6M (7 of 70 past 0.3M)
WITNESS_FIRST_TRY_RLIMIT = 250_000  # Solver_.satisfiable's first try (its questions usually have models)
SEED_TRIES = 8
_SEEDS = {"dim:": (300, 129, 520, 70, 1000, 2049, 200, 64), "grid": (2, 3, 4, 1, 7, 5, 2, 3),
          "p:": (3, 5, 1, 8, 2, 7, 4, 6)}


def _seedable(term) -> list:
    """Names of the sizes (tensor dimensions, grid, integer parameters) that occur in a product of two
    non-constant factors or in a run-time divisor of `term`: fixing them makes those operations linear."""
    out, seen = set(), set()

    def sym(e):
        if isinstance(e, Select) and id(e) not in seen:
            seen.add(id(e))
            go(e.cond)
            sym(e.a)
            sym(e.b)
        if not isinstance(e, BinOp) or id(e) in seen:
            return
        seen.add(id(e))
        if (e.op == "*" and const_of(e.a) is None and const_of(e.b) is None) or (
                e.op in ("//", "%") and const_of(e.b) is None):
            for x in ((e.a, e.b) if e.op == "*" else (e.b,)):
                out.update(n for n in _names(x) if n.startswith(tuple(_SEEDS)))
        sym(e.a)
        sym(e.b)

    def go(t):
        if isinstance(t, Sym):
            sym(t)
        elif isinstance(t, tuple) and t and id(t) not in seen:
            seen.add(id(t))
            if t[0] == "cmp":
                sym(t[2])
                sym(t[3])
            elif t[0] in ("and", "or", "not"):
                for x in t[1:]:
                    go(x)

    go(term)
    return sorted(out)


def _seed_values(names):
    """SEED_TRIES assignments of concrete sizes to `names` (each name walks its kind's list from its own
    offset, so two dimensions differ)."""
    for i in range(SEED_TRIES):
        out = {}
        for j, n in enumerate(names):
            vals = next(v for k, v in _SEEDS.items() if n.startswith(k))
            out[n] = vals[(i + 3 * j) % len(vals)]
        yield out


def _linear_key(e):
    """A key equal for Syms that are the same linear combination of the same non-linear subterms (constants
    folded, sums and differences flattened, constant factors distributed)."""
    out: dict = {}

    def go(x, k):
        c = const_of(x)
        if c is not None:
            out[1] = out.get(1, 0) + k * c
        elif isinstance(x, BinOp) and x.op in ("+", "-"):
            go(x.a, k)
            go(x.b, k if x.op == "+" else -k)
        elif isinstance(x, BinOp) and x.op == "*" and (const_of(x.a) is not None or const_of(x.b) is not None):
            ca = const_of(x.a)
            go(x.b, k * ca) if ca is not None else go(x.a, k * const_of(x.b))
        else:
            out[x] = out.get(x, 0) + k

    go(e, 1)
    return frozenset((a, c) for a, c in out.items() if c)


class Encoder:
    """Sym / bool term -> Z3 formula over integers (linear integer arithmetic for what layouts, loops and
    counters produce). Floor division and modulo by a positive constant introduce an exact quotient and
    remainder (x == c*q + r, 0 <= r < c); XOR/AND/OR (swizzles) are computed exactly on 32-bit vectors
    tied to the integers by bv2nat. Such definitions are side conditions, returned with each term (as a set
    of pointers, see `defs`) so a query asserts exactly the definitions it uses. Remembers the variables it
    met so a model can be read back by name."""

    def __init__(self, ranges: Ranges | None = None):
        self.ranges = ranges or Ranges()
        self.z = _Z3()
        self.vars: dict[str, object] = {}
        self.bvars: dict[str, object] = {}
        self.defs: dict[int, object] = {}  # pointer of a side condition -> the term
        self._memo: dict = {}
        self._bmemo: dict = {}  # id(bool term) -> (term, result)
        self._atoms: dict = {}  # comparison term -> result
        self._divs: dict = {}  # (linear key of the dividend, of the divisor) -> (quotient, remainder, definition)
        self._aux = 0

    def var(self, name: str):
        s = self.vars.get(name)
        if s is None:
            s = self.vars[name] = self.z.const("i:" + name, "int")
        return s

    def _fresh(self, kind, sort="int"):
        self._aux += 1
        return self.z.const(f"aux:{kind}{self._aux}", sort)

    def _def(self, f):
        self.defs[f.value] = f
        return f.value

    def int(self, e):
        """(term, side conditions) of an integer Sym."""
        if is_int(e):
            return self.z.num(e), frozenset()
        hit = self._memo.get(e)
        if hit is not None:
            return hit
        if isinstance(e, Const):
            out = (self.z.num(e.value), frozenset())
        elif isinstance(e, Var):
            out = (self.var(e.name), frozenset())
        elif isinstance(e, BinOp):
            out = self._binop(e.op, e.a, e.b)
        elif isinstance(e, Select):
            (c, sc), (x, sx), (y, sy) = self.bool(e.cond), self.int(e.a), self.int(e.b)
            out = (self.z.ite(c, x, y), sc | sx | sy)
        else:
            raise TypeError(f"cannot encode {e!r}")
        self._memo[e] = out
        return out

    def _binop(self, op, a, b):
        z = self.z
        (x, sx), (y, sy) = self.int(a), self.int(b)
        side = sx | sy
        cb = const_of(b)
        if op == "+":
            return z.add(x, y), side
        if op == "-":
            return z.sub(x, y), side
        if op == "*":
            return z.mul(x, y), side
        if op == "<<" and cb is not None:
            return z.mul(x, z.num(1 << cb)), side
        if op == ">>" and cb is not None:
            op, b, cb, y = "//", Const(1 << cb), 1 << cb, z.num(1 << cb)
        if op == "&" and cb is not None and cb >= 0 and cb & (cb + 1) == 0:
            op, cb, y = "%", cb + 1, z.num(cb + 1)
        if op in ("//", "%"):
            # one quotient and remainder per (dividend, divisor) up to linear rearrangement: x // y and x % y,
            # and ((x + 1) - 1) % y, share them, so the solver never has to prove two floor terms equal (with a
            # run-time divisor that is a nonlinear fact it may not find)
            key = (_linear_key(a), _linear_key(b))
            hit = self._divs.get(key)
            if hit is not None:
                q, r, d = hit
                return (q if op == "//" else r), side | {d}
            q, r = self._fresh("q"), self._fresh("r")
            zero = z.num(0)
            if cb is not None and cb > 0:
                defs = z.and_(z.cmp("==", x, z.add(z.mul(z.num(cb), q), r)), z.cmp("<=", zero, r),
                              z.cmp("<", r, z.num(cb)))
            else:  # a run-time divisor: floor semantics for either sign; q, r are free where y == 0 (the
                # kernel fails there), never an assumption that y > 0 (that would drop models, unsound)
                pos, neg = z.cmp("<", zero, y), z.cmp("<", y, zero)
                defs = z.and_(z.or_(z.not_(z.or_(pos, neg)), z.cmp("==", x, z.add(z.mul(y, q), r))),
                              z.or_(z.not_(pos), z.and_(z.cmp("<=", zero, r), z.cmp("<", r, y))),
                              z.or_(z.not_(neg), z.and_(z.cmp("<", y, r), z.cmp("<=", r, zero))))
            d = self._def(defs)
            self._divs[key] = (q, r, d)
            return (q if op == "//" else r), side | {d}
        if op in ("min", "max"):  # v <= x, v <= y, v in {x, y} (>= for max): a side condition, so a
            # negated path keeps v's definition (one value per argument pair: instances rename the arguments)
            v, rel = self._fresh("m"), "<=" if op == "min" else ">="
            defs = z.and_(z.cmp(rel, v, x), z.cmp(rel, v, y), z.or_(z.cmp("==", v, x), z.cmp("==", v, y)))
            return v, side | {self._def(defs)}
        if op in ("^", "&", "|", "<<", ">>"):
            bx, by = self._fresh("bv", "bv"), self._fresh("bv", "bv")
            defs = z.and_(z.cmp("==", z.bv2int(bx), x), z.cmp("==", z.bv2int(by), y))
            return z.bv2int(z.bvop(op, bx, by)), side | {self._def(defs)}
        raise ValueError(op)

    def bool(self, t):
        """(formula, side conditions) of a bool term (memoized by identity: queries share subterms)."""
        if t is True:
            return self.z.true, frozenset()
        if t is False:
            return self.z.false, frozenset()
        hit = self._bmemo.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        if t[0] == "cmp":  # atoms recur across queries as equal, not identical, terms
            out = self._atoms.get(t)
            if out is None:
                out = self._atoms[t] = self._bool(t)
        else:
            out = self._bool(t)
        self._bmemo[id(t)] = (t, out)
        return out

    def _bool(self, t):
        tag = t[0]
        if tag == "cmp":
            (a, sa), (b, sb) = self.int(t[2]), self.int(t[3])
            return self.z.cmp(t[1], a, b), sa | sb
        if tag in ("and", "or"):
            memo, parts = self._bmemo, []
            for x in t[1:]:  # the memo inline: most children are shared subterms encoded before
                h = memo.get(id(x))
                parts.append(h[1] if h is not None and h[0] is x else self.bool(x))
            side = frozenset().union(*(p[1] for p in parts))
            return (self.z.and_ if tag == "and" else self.z.or_)(*(p[0] for p in parts)), side
        if tag == "not":
            f, side = self.bool(t[1])
            return self.z.not_(f), side
        if tag == "bvar":
            s = self.bvars.get(t[1])
            if s is None:
                s = self.bvars[t[1]] = self.z.const("b:" + t[1], "bool")
            return s, frozenset()
        raise TypeError(f"not a bool term: {t!r}")

    def formula(self, t):
        """The term with its side conditions, as a Z3 term (a pointer)."""
        f, side = self.bool(t)
        return self.z.and_(f, *(self.defs[k] for k in sorted(side))) if side else f

    def range_conditions(self, names):
        out = []
        for n in names:
            lo, hi = self.ranges.of(n)
            out.append(AND(cmp(">=", Var(n), lo), cmp("<", Var(n), hi)))
        return AND(*out)


def query_timeout_s() -> float:
    """The wall-clock safety net: seconds one solver check may take (`TILEPY_VERIFY_QUERY_TIMEOUT`, default 300; 0
    or less: no limit). Only a query that outruns its resource budget's pace hits it (`query_rlimit` steers)."""
    raw = os.environ.get(QUERY_TIMEOUT_ENV, "")
    if not raw.strip():
        return DEFAULT_QUERY_TIMEOUT_S
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{QUERY_TIMEOUT_ENV}={raw!r} is not a number of seconds") from None


def query_rlimit() -> int:
    """Z3 resource units one solver query may spend (`TILEPY_VERIFY_QUERY_RLIMIT`, default DEFAULT_QUERY_RLIMIT;
    0: no limit): a deterministic budget, the same answer on any machine and load."""
    raw = os.environ.get(QUERY_RLIMIT_ENV, "")
    if not raw.strip():
        return DEFAULT_QUERY_RLIMIT
    try:
        value = int(raw.replace("_", ""))
    except ValueError:
        raise ValueError(f"{QUERY_RLIMIT_ENV}={raw!r} is not a whole number of Z3 resource units") from None
    if value < 0:
        raise ValueError(f"{QUERY_RLIMIT_ENV}={raw!r}: expected 0 (no limit) or a positive number of units")
    return value


class SolverUnknown(Exception):
    """Z3 answered "unknown" (a limit reached or an incomplete theory): neither a proof nor a counterexample.
    `rlimit`: the resource budget it ran out of; `seconds`: the wall-clock safety net it ran into (one or neither
    is set)."""

    def __init__(self, reason: str, seconds: float | None = None, rlimit: int | None = None):
        if rlimit is not None:
            what = f"gave up at resource limit {rlimit}"
        elif seconds is not None:
            what = f"gave up after {seconds:g} s"
        else:
            what = "answered unknown"
        super().__init__(f"the solver {what} ({reason})")
        self.reason = reason
        self.seconds = seconds
        self.rlimit = rlimit

    @property
    def env(self) -> str:
        """The environment variable that allows the limit it hit to grow."""
        return QUERY_TIMEOUT_ENV if self.seconds is not None else QUERY_RLIMIT_ENV


class Solver_:
    """One Z3 solver for a whole verification run, with a cache of answers keyed by the query term (by
    identity) and by the formula (Z3 hash-conses its terms, so equal queries are the same AST).

    Every query is bounded by `query_rlimit()` Z3 resource units (deterministic: its tries' budgets below are
    resource limits too) and each solver check by `query_timeout_s()` seconds (the safety net, wall clock); after
    a check that ended unknown the next query gets a fresh Z3 solver (`_try`). An
    "unknown" answer is never taken as a proof:
    `unknown="raise"` (the checks) raises `SolverUnknown`, which `verify_ir` reports as an error finding of the
    check that asked; `unknown="possible"` (the analysis's own questions, where only None means proven) answers
    with an empty model, i.e. "not proven"."""

    def __init__(self, ranges: Ranges | None = None, unknown: str = "raise"):
        if unknown not in ("raise", "possible"):
            raise ValueError(f"unknown={unknown!r}: expected 'raise' or 'possible'")
        self.enc = Encoder(ranges)
        self.solver = z3.Solver(ctx=self.enc.z.ctx)
        self.unknown = unknown
        self.timeout_s = query_timeout_s()  # the safety net, per solver check
        self.rlimit = query_rlimit()  # the query's budget (checks/tickets._quick and checks/coverage lower it)
        self._budgets: dict = {}  # resource units -> Z3 parameters setting them (made once)
        self._abandoned = False  # a check ended unknown since the solver was made (`_try`)
        self._hit = None  # the limit the last unknown check ran into: ("rlimit", units) or ("time", seconds)
        self.cache: dict = {}  # formula id -> (formula, model)
        self.terms: dict = {}  # (id(term), want_vars, small) -> (term, model)
        self.queries = 0
        self.facts: dict = {}  # variable name -> a term defining it (trip counts), added when it occurs
        self.first_try = FIRST_TRY_RLIMIT  # as it is, before concrete sizes are tried (`_answer`)
        self._good_seed = None  # the concrete sizes of the last seeded model (tried first next time)
        self._witness = False  # inside `satisfiable`: a model is what is wanted
        self.small_rlimit = None  # the small-model search's budget where not the query's (checks/tickets._quick)

    def check(self, term, want_vars=(), small=True) -> dict | None:
        """A model (name -> int, plus bool vars) of `term` together with the ranges of its variables, or
        None when it is unsatisfiable. `small=False`: any model (a yes/no question, no counterexample)."""
        if term is False:
            return None
        key = (id(term), tuple(want_vars), small)  # the same term object asked again (terms are DAGs: no hashing)
        hit = self.terms.get(key)
        if hit is not None and hit[0] is term:
            return hit[1]
        model = self._check(term, want_vars, small)
        self.terms[key] = (term, model)
        return model

    def none_of(self, terms) -> bool:
        """True when no term of `terms` is satisfiable, asked as one query (their disjunction: a model of it
        is a model of one of them, so the answer is exact). The checks ask it once for the queries of one
        source op (or pair of ops) over the stage copies of an mbarrier ring (mbarrier_arrays.py unrolls a
        ring into one loop-body copy per stage, each with its own queries) and ask the copies one by one only
        when it is False, to name the stage of the counterexample."""
        terms = [t for t in terms if t is not False]
        if not terms:
            return True
        if len(terms) == 1:
            return self.check(terms[0]) is None
        return self.check(OR(*terms), small=False) is None

    def satisfiable(self, terms) -> list:
        """[bool]: which of `terms` have a model. One query for their disjunction; its model is evaluated on
        every term (a concrete witness: the model covers every variable of each, within its range and the
        facts), and only the terms it does not satisfy are asked again, the same way."""
        out = [t is not False for t in terms]
        todo = [i for i, t in enumerate(terms) if out[i]]
        saved = self.first_try
        # a witness question (is this assertion reached?): concrete sizes are tried after WITNESS_FIRST_TRY_RLIMIT,
        # not FIRST_TRY_RLIMIT (a reached assertion in a stream-K share needs a nonlinear model: 2 s of search each
        # time)
        self.first_try = min(saved, WITNESS_FIRST_TRY_RLIMIT)
        self._witness = True
        try:
            return self._satisfiable(terms, out, todo)
        finally:
            self.first_try = saved
            self._witness = False

    def witness(self, term) -> dict | None:
        """A model of `term` or None, asked as a witness question (as `satisfiable`: concrete sizes and block 0
        tried early); an unknown answer raises SolverUnknown."""
        saved = self.first_try
        self.first_try = min(saved, WITNESS_FIRST_TRY_RLIMIT)
        self._witness = True
        try:
            return self.check(term, small=False)
        finally:
            self.first_try = saved
            self._witness = False

    def _satisfiable(self, terms, out, todo):
        while todo:
            model = self.check(OR(*(terms[i] for i in todo)), small=False)
            if model is None:
                for i in todo:
                    out[i] = False
                break
            env = {k: v for k, v in model.items() if not k.startswith("?")}
            env.update({k[1:]: v for k, v in model.items() if k.startswith("?")})
            rest = []
            for i in todo:
                try:
                    held = bool(evaluate_term(terms[i], env))
                except Exception:  # noqa: BLE001 - a term the evaluator cannot read back: ask it alone
                    held = False
                if not held:
                    rest.append(i)
            if len(rest) == len(todo):  # no witness read back: each alone
                for i in rest:
                    out[i] = self.check(terms[i], small=False) is not None
                break
            todo = rest
        return out

    def _check(self, term, want_vars, small):
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
        fkey = (formula.value, small)
        hit = self.cache.get(fkey)
        if hit is not None:
            return hit[1]
        self.queries += 1
        if self._abandoned:  # a check ended unknown: this query in a fresh solver (`_try`)
            self.solver = z3.Solver(ctx=self.enc.z.ctx)
            self._abandoned = False
        self.solver.push()
        self._seeded = 0
        try:
            self._assert(formula)
            answer = self._answer(term, names)
            if answer == z3.unknown:
                reason = self.solver.reason_unknown()
                if self.unknown == "raise":
                    kind, limit = self._hit or (None, None)
                    raise SolverUnknown(reason, seconds=limit if kind == "time" else None,
                                        rlimit=limit if kind == "rlimit" else None)
                model = {}  # not proven: callers read only None as a proof
                small = False
            elif answer != z3.sat:
                model = None
            else:
                model = self._model(names | set(want_vars), bools=True)
        finally:
            self.solver.pop(1 + self._seeded)
        if model is not None and small and not self._seeded:  # a seeded model has small sizes already
            model = self._small(formula, names, want_vars) or model
        self.cache[fkey] = (formula, model)
        return model

    def _answer(self, term, names):
        """sat / unsat / unknown for the asserted formula. A query Z3 does not settle in FIRST_TRY_RLIMIT is one
        whose models need nonlinear arithmetic (a run-time tile count times the grid, a division by a run-time
        size): it is tried again with the sizes that make it nonlinear fixed to a few concrete values (then its
        products and divisions are by constants: linear), a model of which is a model of the query (never a
        proof: an unsat there says nothing), and only then as it is for the rest of the query's budget. Every
        budget is in Z3 resource units, so which of these paths a query takes does not depend on the machine's
        load."""
        limit = self.rlimit if self.rlimit > 0 else None
        first = self.first_try
        if limit is not None and limit <= first:
            return self._try(limit)
        answer = self._try(first)
        if answer != z3.unknown:
            return answer
        seeds = _seedable(term)  # only now: walking a large query costs
        tries = list(_seed_values(seeds)) if seeds else []
        good = self._good_seed
        if good is not None and tries and set(seeds) <= set(good):  # the sizes of the last seeded model
            tries.insert(0, {n: good[n] for n in seeds})  # first: a ring's next stage copy often has one there
        if self._witness and tries:  # is it reached at all: block 0 first (its share starts at 0)
            zero = {n: 0 for n in sorted(names) if n.startswith("block")}
            tries = [{**v, **zero} for v in tries] + tries
        start = self._count()
        for values in tries:
            self.solver.push()
            self._assert(self.enc.formula(AND(*(cmp("==", Var(n), v) for n, v in values.items()))))
            if self._try(SEED_TRY_RLIMIT) == z3.sat:
                self._seeded = 1  # the model stays readable until the caller pops this frame too
                self._good_seed = values
                return z3.sat
            self.solver.pop()
        end = self._count()
        # what the first try (all of its budget: it ran out) and the seeded tries spent
        spent = first + (end - start if start is not None and end is not None else SEED_TRY_RLIMIT * len(tries))
        rest = None if limit is None else limit - spent
        if rest is not None and rest <= 0:
            self._hit = ("rlimit", limit)
            return z3.unknown
        answer = self._try(rest if rest is not None else 0)
        if answer == z3.unknown and self._hit[0] == "rlimit" and limit is not None:
            self._hit = ("rlimit", limit)  # the query's budget, not its last part, is what it ran out of
        return answer

    def _try(self, units):
        """solver.check() within `units` Z3 resource units (0: no limit; relative to the count at the check, so
        each try gets its own) and the safety net's seconds. On "unknown", `_hit` names the limit it ran into."""
        params = self._budgets.get(units)
        if params is None:
            params = self._budgets[units] = z3.ParamsRef(self.enc.z.ctx)
            params.set("rlimit", units)
            params.set("timeout", max(1, int(self.timeout_s * 1000)) if self.timeout_s > 0 else 4294967295)
        z = self.enc.z
        z3.z3core.Z3_solver_set_params(z.c, self.solver.solver, params.params)
        t0 = time.perf_counter()
        answer = self.solver.check()
        if answer == z3.unknown:
            # Z3's incremental solver carries its search state (the nonlinear solver's adaptive limits, restarts,
            # activities) from check to check, and a check stopped at a limit (or unknown for another reason)
            # leaves it wherever the search stopped: the next query is asked in a fresh solver (`_check`). Without
            # that the correct stream-K fix-up (tests/verify/test_ticket_protocol.py) ran past 20M units on full
            # queries that settle in 0.1M once their quick checks (50k) had run out, and the resource budgets were
            # reverted on 2026-11-25 05:51
            self._abandoned = True
            late = self.timeout_s > 0 and time.perf_counter() - t0 >= 0.98 * self.timeout_s
            self._hit = ("time", self.timeout_s) if late else ("rlimit", units) if units else (None, None)
        return answer

    def _assert(self, f):
        z = self.enc.z
        z.lib.Z3_solver_assert(z.c, self.solver.solver, f)

    def _model(self, names, bools=False):
        m = self.solver.model()
        model = {}
        for n in names:
            if n in self.enc.vars:
                model[n] = m.eval(self.enc.z.expr(self.enc.vars[n]), model_completion=True).as_long()
        if bools:
            for n, s in self.enc.bvars.items():
                v = m.eval(self.enc.z.expr(s), model_completion=False)
                if z3.is_true(v) or z3.is_false(v):
                    model["?" + n] = z3.is_true(v)
        return model

    def _count(self):
        """Z3's resource count (the context's, deterministic), or None where this Z3 does not report it."""
        try:
            return int(self.solver.statistics().get_key_value("rlimit count"))
        except (z3.Z3Exception, KeyError, TypeError, ValueError):
            return None

    def _small(self, formula, names, want_vars):
        """A model with small blocks, sizes and iterations, so a counterexample replays on a small launch."""
        keys = [n for n in names if n.startswith(("block", "dim:", "p:", "grid")) or "#" in n]
        if not keys:
            return None
        own = self.small_rlimit if self.small_rlimit is not None else self.rlimit
        units = min(own, SMALL_MODEL_RLIMIT) if own > 0 else SMALL_MODEL_RLIMIT
        return self._small_search(formula, names, want_vars, keys, units)

    def _small_search(self, formula, names, want_vars, keys, units):
        for bound in (2, 4, 16, 64, 256, 1024):
            conds = AND(*(AND(cmp(">=", Var(n), -bound), cmp("<=", Var(n), bound)) for n in keys),
                        *(cmp("<=", Var(n), bound) for n in keys if n.startswith("dim:")))
            self.solver.push()
            try:
                self._assert(formula)
                self._assert(self.enc.formula(conds))
                answer = self._try(units)
                if answer == z3.sat:
                    return self._model(names | set(want_vars))
                if answer == z3.unknown:  # out of budget: larger bounds are no easier; keep the plain model
                    return None
            finally:
                self.solver.pop()
        return None

    def close(self):
        self.solver = None
        self.enc.z.release()
        self.enc.defs.clear()
        self.enc.vars.clear()
        self.enc.bvars.clear()
        self.enc._memo.clear()
        self.enc._bmemo.clear()
        self.enc._atoms.clear()
        self.cache.clear()
