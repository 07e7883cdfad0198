"""Arrival counters of arrive ops made in some iterations of a loop only, under a periodic guard: a count as a
floor term instead of a count per iteration.

The walker counts a role's arrivals on an mbarrier in program order, affine in the loop indices: `base + n *
cost`, with a guard `if g: arrive(b)` exact only where g holds and is prefix-closed (sync.py). A persistent
kernel whose tile and ring loops are one loop over slots (mbarrier_arrays._flatten: J = tile * R + round)
makes its per-tile arrivals (a TMA-store epilogue's handshake, after the tile's ring) under `if J % R == R - 1`
(and `if J // R > 0`: from the second tile on), which is neither. Under such a guard the walker keeps the
counter exact as `Select(g, then, else)` (domain.branch), and the loop sums that cost over the iterations
before the current one in closed form (`summed`):

    #{v in [lo, hi) : (v + d) % R == E}  =  (hi + d - 1 - E) // R  -  (lo + d - 1 - E) // R     (0 <= E < R)

with the iterations clipped to the guard's bounds (`v + d >= c`, `(v + d) // R' >= c`, ...: an interval of v).
`instance` inverts it for the checks (sync.latest_counted): the m-th iteration where the guard holds is
v0 + m R, v0 the first one. Guards of any other form leave the counter unknown (no exact arrive: sound).
"""

from __future__ import annotations

from tilepy.symbolic import BinOp, Const, as_sym

from .vc import AND, Select, _names, build_linear, cmp, const_of, div_period, linear_form, period_lower, select

_lin = linear_form
_build = build_linear


def _lower(e):
    """A constant lower bound of a term (a constant; max(x, c)), or None."""
    c = const_of(e)
    if c is not None:
        return c
    if isinstance(e, BinOp) and e.op == "max":
        lbs = [x for x in (_lower(e.a), _lower(e.b)) if x is not None]
        return max(lbs) if lbs else None
    return None


def _floor(x, R):
    """x // R, the multiples of R in x's linear form taken out (vc.div_period: R // R is 1, (m R + R - 1) // R is
    m): the counts of two instances then differ by a linear term."""
    if period_lower(R) is not None:
        return div_period("//", x, R)
    return x // R


def _smax(a, b):
    ca, cb = const_of(a), const_of(b)
    if ca is not None and cb is not None:
        return max(ca, cb)
    if ca is not None and (_lower(b) if _lower(b) is not None else ca - 1) >= ca:
        return b
    if cb is not None and (_lower(a) if _lower(a) is not None else cb - 1) >= cb:
        return a
    la, lb = _lin(a), _lin(b)
    if la is not None and lb is not None:
        diff = dict(la)
        for k, v in lb.items():
            diff[k] = diff.get(k, 0) - v
        if all(not v for k, v in diff.items() if k != 1):
            return a if diff.get(1, 0) >= 0 else b
    return BinOp("max", as_sym(a), as_sym(b))


def _smin(a, b):
    ca, cb = const_of(a), const_of(b)
    if ca is not None and cb is not None:
        return min(ca, cb)
    la, lb = _lin(a), _lin(b)
    if la is not None and lb is not None:
        diff = dict(la)
        for k, v in lb.items():
            diff[k] = diff.get(k, 0) - v
        if all(not v for k, v in diff.items() if k != 1):
            return a if diff.get(1, 0) <= 0 else b
    return BinOp("min", as_sym(a), as_sym(b))


class Guard:
    """The iterations v of a loop (step 1) where a guard holds: lo <= v < hi (each bound optional), (v + d) %
    R == E when `period` is (d, R, E), under loop-invariant conditions `inv`."""

    def __init__(self):
        self.lows: list = []
        self.highs: list = []
        self.period = None
        self.inv: list = []
        self.atoms: list = []  # the guard's own atoms over the loop variable

    def count(self, lo, hi, ordered=False):
        """#{v in [lo, hi) : the guard holds} as a term (`ordered`: lo <= hi known)."""
        lo0 = lo
        for x in self.lows:
            lo = _smax(lo, x)
        for x in self.highs:
            hi = _smin(hi, x)
        if not (ordered and lo is lo0 and not self.highs):
            hi = _smax(hi, lo)
        if self.period is None:
            n = hi - lo
        else:
            d, R, E = self.period
            e = _lin(E)
            if e is not None and e.get(R, 0) == 1 and set(e) <= {R, 1}:
                off = -e.get(1, 0)  # E = R - off: (x - 1 - E) // R = (x - 1 + off) // R - 1
                n = _floor(hi + d - 1 + off, R) - _floor(lo + d - 1 + off, R)
            else:
                n = _floor(hi + d - 1 - E, R) - _floor(lo + d - 1 - E, R)
            cond = _in_period(E, R)
            n = select(cond, n, 0)
        return select(AND(*self.inv), n, 0) if self.inv else n

    def first(self, lo):
        """(v0, stride): the iterations >= lo where the guard's period holds are v0 + m * stride (m >= 0), or
        None without a period."""
        for x in self.lows:
            lo = _smax(lo, x)
        if self.period is None:
            return lo, 1
        d, R, E = self.period
        lin = _lin(lo + d)
        if lin is not None and set(lin) <= {R, 1} and lin.get(1, 0) == 0 and _in_period(E, R) is True:
            return lo + E, R   # lo + d a multiple of R
        return lo + (E - d - lo) % R, R

    def upper(self, hi):
        for x in self.highs:
            hi = _smin(hi, x)
        return hi


def _in_period(E, R):
    """True where 0 <= E < R holds for every R the term can take, else the condition as a bool term."""
    e = _lin(E)
    if e is not None and e.get(R, 0) == 1 and set(e) <= {R, 1}:
        off = -e.get(1, 0)  # E = R - off
        return True if 1 <= off <= (_lower(R) or 0) else AND(cmp(">=", off, 1), cmp(">=", R, off))
    ce = const_of(E)
    return True if ce is not None and 0 <= ce < (_lower(R) or 0) else AND(cmp(">=", E, 0), cmp("<", E, R))


def guard(cond, lp, allowed) -> Guard | None:
    """The Guard of bool term `cond` over loop lp's variable, or None when it is not of that form. `allowed`:
    names a loop-invariant term may hold (besides those without '#': parameters, dimensions, block ids)."""
    if _const_step(lp) != 1:
        return None
    v = lp.var
    g = Guard()
    atoms = cond[1:] if isinstance(cond, tuple) and cond and cond[0] == "and" else (cond,)

    def inv(t):
        names = _names(t)
        return v.name not in names and all("#" not in n or n in allowed for n in names) and "tid" not in names

    def shift(x):  # d where x = v + d (d invariant), else None
        lin = _lin(x)
        if lin is None or lin.get(v, 0) != 1:
            return None
        lin = dict(lin)
        del lin[v]
        d = _build(lin)
        return d if inv(d) else None

    for a in atoms:
        if a is True:
            continue
        if not (isinstance(a, tuple) and a and a[0] == "cmp"):
            return None
        _, op, x, y = a
        if inv(x) and inv(y):
            g.inv.append(a)
            continue
        g.atoms.append(a)
        if inv(x):
            x, y = y, x
            op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
        if not inv(y):
            return None
        if isinstance(x, BinOp) and x.op == "%" and op == "==":
            d = shift(x.a)
            if d is None or not inv(x.b) or (_lower(x.b) or 0) < 1 or g.period is not None:
                return None
            g.period = (d, x.b, y)
            continue
        if isinstance(x, BinOp) and x.op == "//":
            d, R = shift(x.a), x.b
            if d is None or not inv(R) or (_lower(R) or 0) < 1:
                return None
        else:
            d, R = shift(x), 1
            if d is None:
                return None
        # f(v) = (v + d) // R op y; f(v) >= c  <=>  v >= c R - d
        def at_least(c, d=d, R=R):
            return c * R - d

        if op == ">=":
            g.lows.append(at_least(y))
        elif op == ">":
            g.lows.append(at_least(y + 1))
        elif op == "<":
            g.highs.append(at_least(y))
        elif op == "<=":
            g.highs.append(at_least(y + 1))
        elif op == "==":
            g.lows.append(at_least(y))
            g.highs.append(at_least(y + 1))
        else:
            return None
    return g


def has_period(cond, lp, allowed) -> bool:
    g = guard(cond, lp, allowed)
    return g is not None and g.period is not None


def _const_step(lp):
    return const_of(lp.step)


def parts(cost, lp):
    """A loop iteration's arrival count `cost` (a term over lp's variable built of Selects) as {conditions:
    coefficient} (the count is the sum of coefficient * [every condition holds]), or None."""

    def go(t):
        c = const_of(t)
        if c is not None:
            return {(): c}
        if isinstance(t, Select):
            a, b = go(t.a), go(t.b)
            if a is None or b is None:
                return None
            out = dict(b)
            for k, x in a.items():
                kk = tuple(sorted({*k, t.cond}, key=repr))
                out[kk] = out.get(kk, 0) + x
            for k, x in b.items():
                kk = tuple(sorted({*k, t.cond}, key=repr))
                out[kk] = out.get(kk, 0) - x
            return {k: x for k, x in out.items() if x}
        if isinstance(t, BinOp) and t.op in ("+", "-"):
            a, b = go(t.a), go(t.b)
            if a is None or b is None:
                return None
            out = dict(a)
            for k, x in b.items():
                out[k] = out.get(k, 0) + (x if t.op == "+" else -x)
            return {k: x for k, x in out.items() if x}
        return None

    return go(cost if not isinstance(cost, int) else Const(cost))


def summed(cost, lp, allowed):
    """[(coefficient, Guard)] of a cost made of guarded arrivals (`parts`), each guard of the Guard form, or
    None."""
    ps = parts(cost, lp)
    if ps is None:
        return None
    out = []
    for conds, coef in ps.items():
        g = guard(AND(*conds), lp, allowed)
        if g is None:
            return None
        out.append((coef, g))
    return out


def total(terms, lo, hi, ordered=False):
    """The arrivals of `summed`'s terms over the iterations in [lo, hi) (`ordered`: lo <= hi known)."""
    out = 0
    for coef, g in terms:
        out = out + g.count(lo, hi, ordered) * coef
    return out
