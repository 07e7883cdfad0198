"""The last-arriver protocol between blocks, and lemmas of the nonlinear arithmetic of tile schedulers, for the
global race check (checks/global_race.py).

The protocol (stream-K's fix-up, a split-K semaphore): each contributor to a unit of work writes its part to
global memory, then takes a ticket `ticket = tp.atomic_add(L[x:x + 1], 1, sem="acq_rel")`; the contributor
whose ticket is `E` (the number of contributors less one) arrived last, and only it, under the mask
`ticket == E`, reads the parts, writes the result and resets `L[x]`. Its accesses are ordered after every
other contributor's accesses before their tickets (each ticket a release, the last one's an acquire: the
atomics on L[x] form one release sequence), and no two blocks are last on one L[x] in a launch. Both facts
hold when, on the lock tensor L:

* (P0) every write to L is a ticket (an unmasked atomic_add of the constant 1 on one element, its old value
  used) or a store of the last arriver into its own ticket's element (the reset); L is zero at launch (the
  launch contract: a kernel that resets its tickets leaves them so for the next call);
* (P1) no block takes two tickets on one element of L (two instances of ticket ops, one block, one element:
  unsatisfiable);
* (P2) every block that takes a ticket on L[x] lies in [lo, hi], where E = hi - lo is the last arriver's
  expected count less one (E written as a difference of terms, the kernel's own `hi - lo`): so at most E + 1
  blocks take a ticket on L[x], the last arriver saw E tickets before its own, and those are all of them.

Then (`protocol_facts`) a pair of accesses whose one side is masked by `ticket == E` and whose other side is
followed, in its own role's program order within the same iteration, by a release ticket on the same
element is ordered, and two accesses masked by last-arriver tickets on one element never meet. Both are
stated as constraints of the race query (the pair races only where they do not apply), so a missing release
(a part written after the ticket), a missing acquire (an access not masked by the ticket), a ticket on the
wrong element or a wrong count (P2 fails: no ordering at all) come back as races with a counterexample.
The grid must be one-dimensional (block_id(0) only) for P2's interval; otherwise the protocol orders nothing.
"""

from __future__ import annotations

from tilepy.symbolic import BinOp, Var, as_sym

from ..vc import AND, NOT, OR, cmp, const_of, subst, term_vars

RELEASE = ("release", "acq_rel")
ACQUIRE = ("acquire", "acq_rel")
MAX_LEMMAS = 400


# ------------------------------------------------------------------------------------------------ lemmas
def _collect(t, prods: dict, divs: dict, seen: set):
    if id(t) in seen:
        return
    seen.add(id(t))
    if isinstance(t, BinOp):
        if t.op == "*" and const_of(t.a) is None and const_of(t.b) is None:
            prods[t] = None
        elif t.op in ("//", "%") and const_of(t.b) is None:
            divs[t] = None
        _collect(t.a, prods, divs, seen)
        _collect(t.b, prods, divs, seen)
    elif isinstance(t, tuple) and t and t[0] in ("cmp", "and", "or", "not"):
        for x in t[2:] if t[0] == "cmp" else t[1:]:
            _collect(x, prods, divs, seen)
    elif hasattr(t, "cond") and hasattr(t, "a") and hasattr(t, "b"):  # Select
        for x in (t.cond, t.a, t.b):
            _collect(x, prods, divs, seen)


def _implies(p, q):
    return OR(NOT(p), q)


_LEMMAS: dict = {}  # (kind, ids of the terms) -> (terms, lemmas): the same instance terms recur across queries
_COLLECTED: dict = {}  # id of a conjunct -> (conjunct, products, divisions)


def _cached(kind, objs, make):
    key = (kind, *map(id, objs))
    hit = _LEMMAS.get(key)
    if hit is not None and all(x is y for x, y in zip(hit[0], objs)):
        return hit[1]
    if len(_LEMMAS) > 200_000:
        _LEMMAS.clear()
    out = [x for x in make() if x is not True]
    _LEMMAS[key] = (objs, out)
    return out


def _collected(t):
    hit = _COLLECTED.get(id(t))
    if hit is not None and hit[0] is t:
        return hit[1], hit[2]
    if len(_COLLECTED) > 200_000:
        _COLLECTED.clear()
    prods: dict = {}
    divs: dict = {}
    _collect(t, prods, divs, set())
    _COLLECTED[id(t)] = (t, prods, divs)
    return prods, divs


def nonlinear_lemmas(*terms, limit=MAX_LEMMAS) -> list:
    """Facts of the products of two unknowns and the floor divisions by a run-time divisor in `terms` that Z3's
    nonlinear arithmetic does not find by itself, each true of every integer model (a tile scheduler's shares
    [b * total // G, (b + 1) * total // G) are disjoint by them, and a block's share holds iteration i exactly
    when b = ((i + 1) * G - 1) // total):
    products a * b: zero, non-negative / positive where a factor is zero / both factors are; two products
    x1 * c and x2 * c with a common factor c >= 0: x1 <= x2 gives x1 * c <= x2 * c and x1 < x2 gives
    x1 * c + c <= x2 * c; (x // c) * c == x - x % c;
    divisions: 0 <= x % y < y and 0 <= x // y <= x (y > 0, x >= 0); x1 // y and x2 // y (y > 0) monotone and
    congruent, equal quotients differing dividends by their remainders, a smaller quotient a smaller
    x - x % y by y at least;
    a product a * c and a division z // c, c > 0: a <= z // c exactly when a * c <= z.
    Each is made once per tuple of terms (the instance terms of a query recur in the next: renaming memoizes)."""
    prods: dict = {}
    divs: dict = {}
    for t in terms:
        for c in (t[1:] if isinstance(t, tuple) and t and t[0] == "and" else (t,)):
            p, d = _collected(c)
            prods.update(p)
            divs.update(d)
    out = []
    plist = list(prods)

    def factors(p):
        return ((p.a, p.b), (p.b, p.a))

    for p in plist:
        out += _cached("p", (p,), lambda p=p: [
            _implies(OR(cmp("==", p.a, 0), cmp("==", p.b, 0)), cmp("==", p, 0)),
            _implies(AND(cmp(">=", p.a, 0), cmp(">=", p.b, 0)), cmp(">=", p, 0)),
            _implies(AND(cmp(">", p.a, 0), cmp(">", p.b, 0)), cmp(">", p, 0)),
            *(_implies(cmp("!=", c, 0), cmp("==", p, a.a - BinOp("%", a.a, c))) for c, a in factors(p)
              if isinstance(a, BinOp) and a.op == "//" and a.b == c)])

    def pp(p, q):
        res = []
        for c, x1 in factors(p):
            for c2, x2 in factors(q):
                if c == c2:
                    for u, pu, v, pv in ((x1, p, x2, q), (x2, q, x1, p)):
                        res.append(_implies(AND(cmp(">=", c, 0), cmp("<=", u, v)), cmp("<=", pu, pv)))
                        res.append(_implies(AND(cmp(">=", c, 0), cmp("<", u, v)), cmp("<=", pu + c, pv)))
        return res

    for i, p in enumerate(plist):
        for q in plist[i + 1:]:
            out += _cached("pp", (p, q), lambda p=p, q=q: pp(p, q))
    dlist = [d for d in divs if d.op == "//"]
    mods = [d for d in divs if d.op == "%"]
    for d in dlist:
        out += _cached("d", (d,), lambda d=d: [
            _implies(AND(cmp(">", d.b, 0), cmp(">=", d.a, 0)), AND(cmp(">=", d, 0), cmp("<=", d, d.a)))])
    pairs = {}
    for d in divs:
        pairs.setdefault((d.a, d.b), None)
    plist2 = list(pairs)

    def xy(x1, x2, y):
        q1, r1, q2, r2 = BinOp("//", x1, y), BinOp("%", x1, y), BinOp("//", x2, y), BinOp("%", x2, y)
        res = [_implies(AND(cmp("!=", y, 0), cmp("==", q1, q2)), cmp("==", x1 - x2, r1 - r2)),
               _implies(AND(cmp("!=", y, 0), cmp("==", x1, x2)), AND(cmp("==", q1, q2), cmp("==", r1, r2)))]
        for u, ru, qu, v, rv, qv in ((x1, r1, q1, x2, r2, q2), (x2, r2, q2, x1, r1, q1)):
            res.append(_implies(AND(cmp(">", y, 0), cmp("<", qu, qv)), cmp("<=", u - ru + y, v - rv)))
            res.append(_implies(AND(cmp(">", y, 0), cmp("<=", u, v)), cmp("<=", qu, qv)))
        return res

    for i, (x1, y) in enumerate(plist2):  # x == y * (x // y) + x % y, linearly between two dividends
        out += _cached("r", (x1, y), lambda x1=x1, y=y: [
            _implies(cmp(">", y, 0), AND(cmp(">=", BinOp("%", x1, y), 0), cmp("<", BinOp("%", x1, y), y))),
            _implies(AND(cmp(">", y, 0), cmp(">=", x1, 0)), cmp("<=", BinOp("%", x1, y), x1))])
        for x2, y2 in plist2[i + 1:]:
            if y2 == y:
                out += _cached("xy", (x1, x2, y), lambda x1=x1, x2=x2, y=y: xy(x1, x2, y))
    for p in plist:
        for c, a in factors(p):
            for d in dlist:
                if d.b == c:
                    def pd(a=a, c=c, p=p, d=d):
                        le, ple = cmp("<=", a, d), cmp("<=", p, d.a)
                        return [_implies(cmp(">", c, 0), OR(AND(le, ple), AND(NOT(le), NOT(ple))))]
                    out += _cached("pd", (p, a, d), pd)
    del mods
    return out if limit is None else out[:limit]


# ------------------------------------------------------------------------------------------------ tickets
def _conjuncts(t):
    if isinstance(t, tuple) and t and t[0] == "and":
        for x in t[1:]:
            yield from _conjuncts(x)
    else:
        yield t


def _zero(acc):
    return tuple(0 for _ in acc.shape)


def _address(acc):
    """The element index of a one-element access (None where not modelled)."""
    if any(n != 1 for n in acc.shape):
        return None
    idx = acc.indices(_zero(acc))
    return None if any(i is None for i in idx) else idx


def _rename(term, m: dict, suffix: str):
    """`term` in the instance of `m`: its loop variables as m renames them, every other fresh variable of the
    walk (a '#' name) the block's own, as instances._instance renames them."""
    for name in term_vars(term):
        if "#" in name and "@" not in name and name not in m:
            m[name] = Var(name + suffix)
    return subst(term, m)


def last_of(ctx, acc, coords=None):
    """(Ticket, E) when the access's mask holds a conjunct `ticket == E` of a ticket whose lock tensor keeps the
    protocol (see the module docstring), else None."""
    tickets = ctx.analysis.tickets
    if not tickets:
        return None
    memo = ctx.__dict__.setdefault("_last_of", {})
    if coords is None:
        hit = memo.get(id(acc))
        if hit is not None and hit[0] is acc:
            return hit[1]
        out = _last_of(ctx, acc, tuple(Var(f"gc{d}") for d in range(len(acc.shape))))
        memo[id(acc)] = (acc, out)
        return out
    return _last_of(ctx, acc, coords)


def _last_of(ctx, acc, coords):
    tickets = ctx.analysis.tickets
    m = acc.mask(coords)
    if m is True:
        return None
    for c in _conjuncts(m):
        if isinstance(c, tuple) and c[0] == "cmp" and c[1] == "==":
            for x, y in ((c[2], c[3]), (c[3], c[2])):
                if isinstance(x, Var) and x.name in tickets and x.name not in term_vars(y):
                    tk = tickets[x.name]
                    if _address(tk.access) is not None and _prefix(tk.access.point.loops, acc.point.loops) \
                            and protocol_ok(ctx, tk.access.param):
                        return tk, y
    return None


def _prefix(outer, inner) -> bool:
    return len(outer) <= len(inner) and all(a is b for a, b in zip(outer, inner))


def _same_thread_order(x, t) -> bool:
    """Whether ticket access t follows access x in the program order of x's threads (same loops, same role,
    x's threads among t's, a later statement), or is x itself."""
    if x is t:
        return True
    px, pt = x.point, t.point
    if len(px.loops) != len(pt.loops) or not _prefix(pt.loops, px.loops) or px.role != pt.role:
        return False
    if px.threads is not None and pt.threads is not None:
        import numpy as np

        if not np.isin(px.threads, pt.threads).all():
            return False
    elif pt.threads is not None:
        return False
    from ..vc import _linear_key

    key = dict(_linear_key(as_sym(pt.counters.get("T", 0) - px.counters.get("T", 0))))
    return set(key) <= {1} and key.get(1, 0) > 0


def _tickets_on(ctx, param):
    return [tk for tk in ctx.analysis.tickets.values() if tk.access.param == param]


def protocol_facts(ctx, a, m1, s1, b, m2, s2):
    """Constraints the last-arriver protocol adds to the race query of accesses a (instance m1) and b (m2):
    a list of bool terms, or False where the pair never meets."""
    if not ctx.analysis.tickets:
        return []
    la, lb = last_of(ctx, a), last_of(ctx, b)
    out = []
    if la and lb and la[0].access.param == lb[0].access.param:
        xa = [_rename(i, dict(m1), s1) for i in _address(la[0].access)]
        xb = [_rename(i, dict(m2), s2) for i in _address(lb[0].access)]
        eq = AND(*(cmp("==", p, q) for p, q in zip(xa, xb)))
        if eq is True:
            return False
        out.append(NOT(eq))
    for x, mx, sx, ly, my, sy in ((a, m1, s1, lb, m2, s2), (b, m2, s2, la, m1, s1)):
        if not ly or ly[0].sem not in ACQUIRE:
            continue
        xy = [_rename(i, dict(my), sy) for i in _address(ly[0].access)]
        for tk in _tickets_on(ctx, ly[0].access.param):
            if tk.sem not in RELEASE or not _same_thread_order(x, tk.access):
                continue
            mt = dict(mx)
            xt = [_rename(i, mt, sx) for i in _address(tk.access)]
            ran = _rename(tk.access.point.path, mt, sx)
            out.append(NOT(AND(ran, *(cmp("==", p, q) for p, q in zip(xt, xy)))))
    return out


def protocol_ok(ctx, param) -> bool:
    """(P0)-(P2) of the module docstring on lock tensor `param` (cached per analysis)."""
    memo = ctx.__dict__.setdefault("_ticket_protocol", {})
    if param not in memo:
        memo[param] = False  # while it is being decided (last_of below asks again)
        memo[param] = _decide(ctx, param)
    return memo[param]


def _decide(ctx, param) -> bool:
    from .instances import _block_ranges, _instance, grid_axes

    A = ctx.analysis
    axes = grid_axes(ctx)
    tks = _tickets_on(ctx, param)
    if not tks or not all(tk.unit and _address(tk.access) is not None for tk in tks):
        return False
    by_access = {id(tk.access): tk for tk in tks}
    lasts = []
    for acc in A.global_accesses:
        if acc.param != param:
            continue
        if acc.kind == "atomic":
            if id(acc) not in by_access:
                return False
        elif acc.kind == "write":
            ly = _last_candidate(A, acc)
            if ly is None or ly[0].access.param != param or _address(acc) is None \
                    or tuple(_address(acc)) != tuple(_address(ly[0].access)):
                return False
    for acc in A.global_accesses:  # every access masked by a ticket on `param`: its count E = hi - lo
        ly = _last_candidate(A, acc)
        if ly is not None and ly[0].access.param == param:
            lasts.append((acc, ly))
    # (P1) one ticket per block and element
    p1 = []
    for i, p in enumerate(tks):
        for q in tks[i:]:
            mp, cp, _, _ = _instance(p.access, "@1", True)
            mq, cq, _, _ = _instance(q.access, "@2", True)
            if p is q:
                differ = OR(*(cmp("!=", Var(lp.var.name + "@1"), Var(lp.var.name + "@2"))
                              for lp in p.access.point.loops))
                if differ is False:
                    continue
            else:
                differ = True
            xp = [subst(i_, mp) for i_ in _address(p.access)]
            xq = [subst(i_, mq) for i_ in _address(q.access)]
            p1.append(AND(cp, cq, _block_ranges("@1", axes),
                          *(cmp("==", Var(f"block{k}@1"), Var(f"block{k}@2")) for k in range(3)),
                          differ, *(cmp("==", u, v) for u, v in zip(xp, xq))))
    # (P2) the takers of L[x] lie in [lo, hi] of every last arriver on L[x]: asked at its ticket's instances
    # (every iteration that takes the ticket, a superset of those where the masked access runs)
    from .instances import _divisions

    def nonzero(c):  # an address divides by a run-time divisor: a block whose divisor is 0 fails there first
        return AND(c, *(cmp("!=", y, 0) for _x, y in _divisions(c, {})))

    p1 = [nonzero(c) for c in p1 if c is not False]
    if p1 and not none_linear(ctx, p1) and any(_sat(ctx, c) for c in p1):
        return False
    # the takers vary on one grid axis (the others equal), inside [lo, hi] on it
    for axis in sorted(axes) or [0]:
        if _takers_in_interval(ctx, lasts, tks, axes, axis, nonzero):
            return True
    return False


def _takers_in_interval(ctx, lasts, tks, axes, axis, nonzero) -> bool:
    from .instances import _block_ranges, _instance

    p2 = []
    seen = set()
    for _acc, (tk, e) in lasts:
        key = (tk.var.name, e)
        if key in seen:
            continue
        seen.add(key)
        split = _difference(e)
        if split is None:
            return False
        hi, lo = split
        my, cy, _, _ = _instance(tk.access, "@2", True)
        xy = [_rename(i_, my, "@2") for i_ in _address(tk.access)]
        lo2, hi2 = _rename(lo, my, "@2"), _rename(hi, my, "@2")
        for p in tks:
            mp, cp, _, _ = _instance(p.access, "@1", True)
            xp = [subst(i_, mp) for i_ in _address(p.access)]
            b1 = Var(f"block{axis}@1")
            p2.append(AND(cp, cy, _block_ranges("@1", axes), _block_ranges("@2", axes),
                          *(cmp("==", u, v) for u, v in zip(xp, xy)),
                          OR(cmp("<", b1, lo2), cmp(">", b1, hi2),
                             *(cmp("!=", Var(f"block{k}@1"), Var(f"block{k}@2")) for k in range(3) if k != axis))))
    conds = [nonzero(c) for c in p2 if c is not False]
    if not conds or none_linear(ctx, conds):
        return True
    return not any(_sat(ctx, c) for c in conds)


def _last_candidate(A, acc):
    """last_of without the protocol test (deciding the protocol itself)."""
    m = acc.mask(tuple(Var(f"gc{d}") for d in range(len(acc.shape))))
    if m is True:
        return None
    for c in _conjuncts(m):
        if isinstance(c, tuple) and c[0] == "cmp" and c[1] == "==":
            for x, y in ((c[2], c[3]), (c[3], c[2])):
                if isinstance(x, Var) and x.name in A.tickets and x.name not in term_vars(y):
                    tk = A.tickets[x.name]
                    if _address(tk.access) is not None and _prefix(tk.access.point.loops, acc.point.loops):
                        return tk, y
    return None


def _sat(ctx, cond) -> bool:
    """Whether cond may be satisfiable (a timeout counts as satisfiable: the protocol is then not used)."""
    from ..vc import SolverUnknown

    try:
        return check_linear_first(ctx, cond) is not None
    except SolverUnknown:
        return True


def _difference(e):
    """(hi, lo) with e == hi - lo: e's terms of positive sign (and its constant) and of negative sign, or None
    where e has no negative part that names a lower bound."""
    pos, neg, const = [], [], [0]

    def go(t, sign):
        c = const_of(t)
        if c is not None:
            const[0] += sign * c
        elif isinstance(t, BinOp) and t.op == "+":
            go(t.a, sign)
            go(t.b, sign)
        elif isinstance(t, BinOp) and t.op == "-":
            go(t.a, sign)
            go(t.b, -sign)
        else:
            (pos if sign > 0 else neg).append(t)

    go(e, 1)
    hi = const[0]
    for t in pos:
        hi = t + hi if not isinstance(hi, int) or hi else t
    lo = 0
    for t in neg:
        lo = t + lo if not isinstance(lo, int) or lo else t
    return hi, lo


# ------------------------------------------------------------------------------------------------ abstraction
_BIG = 1 << 256


def _nonlinear(t) -> bool:
    return isinstance(t, BinOp) and ((t.op == "*" and const_of(t.a) is None and const_of(t.b) is None)
                                     or (t.op in ("//", "%") and const_of(t.b) is None))


def linear_abstraction(ctx, term):
    """`term` with every product of two unknowns and every floor division / remainder by a run-time divisor
    replaced by a variable of its own (one per distinct subterm, any integer): a relaxation (a model of term is
    one of the abstraction, the variables taking the subterms' values), so an unsatisfiable abstraction proves
    term unsatisfiable. With the lemmas above conjoined first, a tile scheduler's race queries are linear and
    settle in milliseconds where Z3's nonlinear search runs out of time."""
    from tilepy.symbolic import Const

    from ..vc import Select, _apply, select

    names = ctx.__dict__.setdefault("_nl_names", {})
    explicit = ctx.solver.enc.ranges.explicit
    memo = ctx.__dict__.setdefault("_nl_memo", {})  # by id, the term kept: queries share instance terms

    def sym(e):
        if not isinstance(e, (BinOp, Select)):
            return e
        hit = memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        if isinstance(e, Select):
            out = select(go(e.cond), sym(e.a), sym(e.b))
        else:
            a, b = sym(e.a), sym(e.b)
            out = e if a is e.a and b is e.b else _apply(e.op, a, b)
            if isinstance(out, int):
                out = Const(out)
            if _nonlinear(out):
                v = names.get(out)
                if v is None:
                    v = names[out] = Var(f"nl~{len(names)}")
                    explicit[v.name] = (-_BIG, _BIG)
                out = v
        memo[id(e)] = (e, out)
        return out

    bmemo = ctx.__dict__.setdefault("_nl_bmemo", {})

    def go(t):
        if not (isinstance(t, tuple) and t):
            return t
        hit = bmemo.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        if t[0] == "cmp":
            out = cmp(t[1], sym(t[2]), sym(t[3]))
        elif t[0] == "and":
            out = AND(*(go(x) for x in t[1:]))
        elif t[0] == "or":
            out = OR(*(go(x) for x in t[1:]))
        elif t[0] == "not":
            out = NOT(go(t[1]))
        else:
            out = t
        bmemo[id(t)] = (t, out)
        return out

    return go(term)


def check_linear_first(ctx, cond):
    """solver.check(cond), first asked as its linear abstraction with the nonlinear lemmas: None (proven) when
    that is unsatisfiable, else the full query's answer (a model, None, or SolverUnknown)."""
    lemmas = nonlinear_lemmas(cond)
    if not lemmas:  # linear already
        return ctx.solver.check(cond)
    answer = _quick(ctx, cond, units=LINEAR_FIRST_QUICK_RLIMIT)  # many such queries Z3 settles at once as they are
    if answer is not _UNKNOWN:
        return answer
    full = AND(cond, *lemmas)
    if ctx.solver.check(linear_abstraction(ctx, full), small=False) is None:
        return None
    return ctx.solver.check(full)


# Budgets in Z3 resource units (deterministic: vc.py's solver budgets; ~3M a second on the 2-core sandbox)
QUICK_RLIMIT = 100_000  # ~0.02-0.1 s
# check_linear_first's as-is try: the global race pairs Z3 settles as they are take 1-10 ms (2-core sandbox, loaded);
# those it does not settle in 0.1 s (gemm_streamk's two ticket pairs) have a linear abstraction unsatisfiable in
# 10 ms, so a longer try only waits (0.2 s of gemm_streamk's 0.7)
LINEAR_FIRST_QUICK_RLIMIT = 50_000  # ~0.01-0.03 s (the pairs settled as they are: 1-50k)
_UNKNOWN = object()


def _quick(ctx, cond, small=True, units=None):
    """solver.check(cond) within `units` Z3 resource units (QUICK_RLIMIT): its answer, or _UNKNOWN (never a
    proof). A model's search for small sizes (`small`) keeps QUICK_RLIMIT whatever `units` is: a shorter try must
    not leave larger counterexamples (a replay allocates their sizes)."""
    from ..vc import SolverUnknown

    solver = ctx.solver
    if solver.unknown != "raise":  # an unknown would read as a model there
        return _UNKNOWN
    saved, saved_small = solver.rlimit, solver.small_rlimit
    solver.rlimit = QUICK_RLIMIT if units is None else units
    solver.small_rlimit = QUICK_RLIMIT
    try:
        return solver.check(cond, small=small)
    except SolverUnknown:
        return _UNKNOWN
    finally:
        solver.rlimit, solver.small_rlimit = saved, saved_small


def none_quick_then_linear(ctx, terms, parts) -> bool:
    """True when no term of `terms` has a model: their disjunction asked as it is for QUICK_RLIMIT (most settle at
    once), then, where that does not settle it, each of `parts` (terms whose disjunction covers `terms`)
    through its own linear abstraction (`each_unsat_by_abstraction`), then the disjunction in full
    (solver.none_of: an unknown raises SolverUnknown)."""
    terms = [t for t in terms if t is not False]
    if not terms:
        return True
    got = _quick(ctx, OR(*terms), small=False)
    if got is not _UNKNOWN:
        return got is None
    if len(parts) > 8:
        # many parts (a persistent ring's cycles through the store warp's handshake: 720 at 4 stages): their
        # abstractions asked ABSTRACTION_CHUNK at a time, one by one only in a chunk that is not proven so
        parts = [p for i in range(0, len(parts), ABSTRACTION_CHUNK)
                 if not none_linear(ctx, parts[i:i + ABSTRACTION_CHUNK]) for p in parts[i:i + ABSTRACTION_CHUNK]]
    if each_unsat_by_abstraction(ctx, parts):
        return True
    return ctx.solver.none_of(terms)


# parts of none_quick_then_linear asked together (more than 8), each with its own lemmas (gemm_persistent DEFER=2's
# cycles at 4 stages: 720 parts one by one 3.4 s CPU, 12 chunks of 64 0.4 s; 48 parts 0.18 s -> 0.01 s)
ABSTRACTION_CHUNK = 64


def each_unsat_by_abstraction(ctx, terms) -> bool:
    """True when every term of `terms` holds a product or run-time division and its own linear abstraction
    with its lemmas is unsatisfiable (then none has a model). False says nothing: a term that is linear
    already (the solver settles it as it is), an abstraction with a model or an unknown answer. Each term gets
    its own lemmas (the disjunction of many, in one query, would pass MAX_LEMMAS and lose some)."""
    from ..vc import SolverUnknown

    for t in terms:
        if t is False:
            continue
        lemmas = nonlinear_lemmas(t)
        if not lemmas:
            return False
        try:
            if ctx.solver.check(linear_abstraction(ctx, AND(t, *lemmas)), small=False) is not None:
                return False
        except SolverUnknown:
            return False
    return True


def none_linear(ctx, conds) -> bool:
    """True when the linear abstraction of the disjunction of `conds` (each with its lemmas) is unsatisfiable:
    none of them has a model. False says nothing (ask them one by one)."""
    full = OR(*(AND(c, *nonlinear_lemmas(c)) for c in conds))
    try:
        return ctx.solver.check(linear_abstraction(ctx, full), small=False) is None
    except Exception:  # noqa: BLE001 - an unknown answer: not proven here
        return False
