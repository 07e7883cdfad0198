"""Happens-before between concurrently running roles through mbarriers (the interpreter's semantics).

An mbarrier `b` with arrival count C completes phase p at its ((p + 1) C)-th arrival; each executing role's
`mbarrier_arrive` counts once. When all arrivals on `b` come from one role, the arrivals that role made
before an op are a counter in program order (``A:<bar>|<role>``, affine in the loop indices like every
other counter; a counter bumped under a uniform `if` is exact where the guard held in this and, when the
guard is prefix-closed in the loop index, every earlier iteration: `Arrive.valid`). Then:

* an arrive X with index a(X) happens before a `mbarrier_wait(b, q)` W returns iff a(X) < (q + 1) C;
* a `copy_bulk` Y on `b` is tied to the phase in progress at its issue, a(Y) // C where a(Y) counts the
  issuing role's arrivals before it, and its data is visible after any wait W(b, q) with a(Y) < (q + 1) C;
* so an op e1 happens before an op e2 of another role when e1 -> X (program order in e1's role) ->
  W (b, X's arrival counted) -> e2 (program order in e2's role); a bulk copy's data lands before e2 when
  Y -> W -> e2; and a bulk copy lands before a later one through two hops (Y1 -> W1 -> X -> W2 -> Y2).

Two ops are in one *line* when one's role is a prefix of the other's (program order relates them: the
interpreter runs a role's threads in lock step, and a role branch starts after the code before it);
otherwise they run concurrently. Only the latest executions of a wait before an op (this, the previous and
the one before that iteration of the innermost common loop; the last iteration of loops the op is not in)
and the earliest executions of an arrive after it are tried, which keeps every query quantifier-free;
a chain through other instances is not found (a false alarm at worst).

An mbarrier that n > 1 roles arrive on (count C, FA3's two consumer warpgroups releasing one stage) gives
edges only where its per-phase structure is proven (`shares`): C = n c, and every arrive instance X of a
role R with a_R(X) >= c (a_R: R's own arrivals on it before X) comes after a wait on it for phase
>= a_R(X) // c - 1 (in R's program order, or through a chain of single-role edges). Then by induction no role
gets more than (p + 1) c arrivals in before phase p completes, so at completion each role has made exactly
(p + 1) c: a wait on phase q is ordered after every arrival X with a_R(X) < (q + 1) c of EACH role, the
single-role rule with c for C. Without the proof such an mbarrier gives no edges (its phases depend on the
interleaving; sound).
"""

from __future__ import annotations

import numpy as np

from tilepy import ir
from tilepy.symbolic import Var

from .vc import AND, NOT, OR, cmp, const_of, is_int, subst

THREAD_OPS = {"thread_id", "lane_id", "warp_id", "warpgroup_id"}


# ------------------------------------------------------------------------------------------ IR pre-scan


def prescan(body, analysis, arrays=False):
    """Which roles arrive on each mbarrier and how many wait ops each has (before the walk: reaching.py
    needs them while the walk is still going). A role is the tuple of (id(If), branch) of the enclosing
    thread-dependent `if`s, as the walker numbers them. `arrays`: an op on an mbarrier array's element
    (`full[k % S]`) counts as one on the array (a walk naming elements by term: symbolic_ring.py)."""
    per_thread: set = set()

    def thread_dep(e) -> bool:
        for x in ir.walk_exprs(e):
            if isinstance(x, ir.Call) and x.op in THREAD_OPS:
                return True
            if isinstance(x, ir.Var) and x.name in per_thread:
                return True
        return False

    def go(stmts, role):
        for s in stmts:
            if isinstance(s, ir.Assign):
                if thread_dep(s.value):
                    per_thread.add(s.name)
            elif isinstance(s, ir.Eval):
                c = s.call
                b = c.args[0] if c.args else None
                if arrays and isinstance(b, ir.Call) and b.op == "mbarrier_at" and isinstance(b.args[0], ir.Var):
                    b = b.args[0]
                if c.op == "store_remote":     # (its mbarrier is its third argument; the op is one arrival)
                    b = c.args[2]
                    if arrays and isinstance(b, ir.Call) and b.op == "mbarrier_at" and isinstance(b.args[0], ir.Var):
                        b = b.args[0]
                if c.op in ("mbarrier_arrive", "mbarrier_wait", "store_remote") and isinstance(b, ir.Var):
                    bar = f"mbar:{b.name}"
                    if c.op != "mbarrier_wait":
                        analysis.arrive_roles.setdefault(bar, set()).add(role)
                        ops = analysis.__dict__.setdefault("_arrive_ops", {})
                        ops[bar, role] = ops.get((bar, role), 0) + 1
                    else:
                        analysis.wait_nodes[bar] = analysis.wait_nodes.get(bar, 0) + 1
                        per = analysis.wait_roles.setdefault(bar, {})
                        per[role] = per.get(role, 0) + 1
            elif isinstance(s, ir.For):
                go(s.body, role)
            elif isinstance(s, ir.If):
                if s.kind == "role" or thread_dep(s.cond):
                    go(s.then, role + ((id(s), 0),))
                    go(s.orelse, role + ((id(s), 1),))
                else:
                    go(s.then, role)
                    go(s.orelse, role)

    go(body, ())


def drop_dead_roles(analysis):
    """After the walk: a role none of whose arrive ops on an mbarrier can run (each recorded with the path
    condition False: a uniform guard the walker folded, e.g. consumer c's `if k % 2 == c` in the stage copies of
    a ring whose STAGES is even, where stage s only ever holds tiles of parity s % 2) does not arrive on it.
    Only a role whose every arrive op on it was recorded so is dropped (an op the walk did not record keeps it)."""
    ops = analysis.__dict__.get("_arrive_ops", {})
    dead: dict = {}
    live = set()
    for x in analysis.arrives:
        key = (x.bar, tuple(x.point.role))
        if x.point.path is False:
            dead[key] = dead.get(key, 0) + 1
        else:
            live.add(key)
    for (bar, role), n in dead.items():
        roles = analysis.arrive_roles.get(bar)
        if (bar, role) not in live and n == ops.get((bar, role)) and roles and role in roles and len(roles) > 1:
            roles.discard(role)


def sole_role(analysis, bar):
    """The one role that arrives on `bar`, or None (several, or none)."""
    roles = analysis.arrive_roles.get(bar)
    if not roles or len(roles) != 1:
        return None
    return next(iter(roles))


def waits_in_line(analysis, bar, role) -> int:
    """How many mbarrier_wait ops on `bar` run in `role`'s line (its own, its enclosing roles', its
    sub-roles'): the waits that can order what `role` does after them."""
    return sum(k for r, k in analysis.wait_roles.get(bar, {}).items() if in_line(r, tuple(role)))


# ------------------------------------------------------------------------------------------ relations


def in_line(r1: tuple, r2: tuple) -> bool:
    n = min(len(r1), len(r2))
    return tuple(r1[:n]) == tuple(r2[:n])


def concurrent(p1, p2) -> bool:
    return not in_line(p1.role, p2.role)


def _T(point, m):
    t = point.counters.get("T", 0)
    return subst(t, m) if m else t


def _B(point, m):
    b = point.counters.get("B", 0)
    return subst(b, m) if m else b


def runs_on(ev, p, thread=None) -> bool:
    """Does every thread that runs p's instance (or `thread`, when given) also execute ev? Program order
    orders a thread's own ops only: an op of a narrower role than p's covers only some of p's threads."""
    if ev.threads is None:
        return True
    if thread is not None:
        return int(thread) in set(ev.threads.tolist())
    return p.threads is not None and bool(np.isin(p.threads, ev.threads).all())


def _common(a, b) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] is b[n]:
        n += 1
    return n


def instances_before(ev, ref, mref, depth=3):
    """[(renaming of ev's loops, validity)] of the latest executions of ev's point before an instance of
    ref's point (renamed by mref): iterations k, k - step, ... of the innermost common loop; the last
    iteration of ev's loops that ref is not in. The caller adds the program-order condition."""
    wl, rl = ev.loops, ref.loops
    common = _common(wl, rl)
    base, valid = {}, []
    for lp in wl[:common]:
        base[lp.var.name] = mref.get(lp.var.name, lp.var)
        base[lp.trip.name] = mref.get(lp.trip.name, lp.trip)
    for lp in wl[common:]:
        base[lp.var.name] = subst(lp.start + (lp.trip - 1) * lp.step, base)
        valid.append(cmp(">=", lp.trip, 1))
    if common == 0:
        return [(base, AND(*valid))]
    L = wl[common - 1]
    k = base[L.var.name]
    out = []
    for d in range(depth):
        m = dict(base)
        m[L.var.name] = k - d * L.step
        for lp in wl[common:]:
            m[lp.var.name] = subst(lp.start + (lp.trip - 1) * lp.step, m)
        out.append((m, AND(cmp(">=", m[L.var.name], subst(L.start, base)), *[subst(v, m) for v in valid])))
    return out


def instances_after(ev, ref, mref, depth=2):
    """[(renaming, validity)] of the earliest executions of ev's point after an instance of ref's point:
    iterations k, k + step of the innermost common loop (while in range); the first iteration of ev's
    loops that ref is not in."""
    wl, rl = ev.loops, ref.loops
    common = _common(wl, rl)
    base = {}
    for lp in wl[:common]:
        base[lp.var.name] = mref.get(lp.var.name, lp.var)
        base[lp.trip.name] = mref.get(lp.trip.name, lp.trip)
    shifts = [0] if common == 0 else list(range(depth))
    out = []
    for d in shifts:
        m = dict(base)
        conds = []
        if common:
            L = wl[common - 1]
            m[L.var.name] = base[L.var.name] + d * L.step
            if d:
                conds.append(cmp("<", m[L.var.name], subst(L.stop, base)) if _pos(L.step) else
                             subst(L.constraint(), m))
        for lp in wl[common:]:
            m[lp.var.name] = subst(lp.start, m)
            conds.append(cmp(">=", lp.trip, 1))
        out.append((m, AND(*conds)))
    return out


def _pos(step) -> bool:
    from .vc import const_of

    c = const_of(step)
    return c is not None and c > 0


def latest_counted(ev, index, key, bound):
    """(renaming, validity) of the latest instance of `ev` (a point in at most one loop, whose arrival
    counter `key` has value `index` there) with index < bound, or None when that is not expressible."""
    loops = ev.loops
    if not loops:
        return {}, cmp("<", index, bound)
    if len(loops) != 1:
        return None
    L = loops[0]
    beta = L.cost.get(key, 0)
    if key in L.periodic:
        return _latest_periodic(L, index, key, bound)
    if not is_int(beta) or beta <= 0:
        return None
    alpha = subst(index, {L.var.name: L.start})
    n = (bound - 1 - alpha) // beta
    k = L.start + n * L.step
    m = {L.var.name: k}
    return m, AND(cmp(">=", n, 0), cmp("<", n, L.trip))


def _latest_periodic(L, index, key, bound):
    """latest_counted for an arrive made once in the iterations where a periodic guard holds (periodic.py): the
    m-th of them (m = bound - 1 - the arrivals before the loop) is v0 + m R. Only where the counter at the op is
    the iteration's count itself (no arrival on it earlier in the iteration) and one guarded arrival makes it."""
    terms = L.periodic.get(key)
    if not terms or len(terms) != 1 or terms[0][0] != 1 or index is not L.ctr.get(key):
        return None
    g = terms[0][1]
    v0, stride = g.first(L.start)
    m = bound - 1 - L.base.get(key, 0)
    v = v0 + m * stride
    # (renamed by v, the guard's and the count's floor terms fold: vc.div_period)
    return {L.var.name: v}, AND(cmp(">=", m, 0), cmp("<", m, g.count(L.start, L.stop)), *g.inv)


# ------------------------------------------------------------------------------------------ happens-before


class Sync:
    """Happens-before terms over one analysis (bool terms over the two instances' renamed variables).
    `shares`: the proven multi-role mbarriers (None: prove them, once per analysis; {}: single-role edges
    only, which is what the proof itself uses)."""

    def __init__(self, analysis, shares=None):
        self.A = analysis
        self.waits = [w for w in analysis.waits if w.bar is not None and w.phase is not None]
        self.arrives = analysis.arrives
        self.shares = multi_role_shares(analysis) if shares is None else shares

    def count(self, bar):
        """Arrivals per phase by ONE arriving role: the mbarrier's count when one role arrives on it, count / n
        when n roles share it by a proven structure (`shares`); the count otherwise (no exact arrive then)."""
        if bar in self.shares:
            return self.shares[bar]
        return self.A.mbarriers.get(bar)

    def exact_arrive(self, x) -> bool:
        if self.count(x.bar) is None:
            return False
        return sole_role(self.A, x.bar) == tuple(x.point.role) or x.bar in self.shares

    def exact_copy(self, y) -> bool:
        return (y.bar is not None and self.count(y.bar) is not None and y.arr is not None
                and sole_role(self.A, y.bar) == tuple(y.point.role))

    def waits_before(self, bar, p2, m2, thread=None):
        """[(wait, renaming, condition)]: executions of waits on `bar` in p2's line before p2's instance.
        A wait orders what follows it only for the threads that executed it: where `thread` (the thread of
        p2's instance; None: every thread of p2's point) may not have, a block barrier must follow the wait."""
        out = []
        for w in self.waits:
            if w.bar != bar or not in_line(w.point.role, p2.role):
                continue
            for mw, vw in instances_before(w.point, p2, m2):
                c = AND(vw, subst(w.point.path, mw), cmp("<", _T(w.point, mw), _T(p2, m2)))
                if not runs_on(w.point, p2, thread):
                    c = AND(c, cmp("<", _B(w.point, mw), _B(p2, m2)))
                out.append((w, mw, c))
        return out

    def sync(self, p1, m1, p2, m2, t1=None, t2=None):
        """Bool term: the instance of p1 (renamed by m1) happens before that of p2, through one
        arrive -> wait edge (p1's role arrives after p1, p2's role waits for that arrival before p2). `t1`,
        `t2`: the threads of the two instances (None: any thread of the point); an arrive releases only what
        the threads that execute it did."""
        terms = []
        for x in self.arrives:
            if not in_line(x.point.role, p1.role) or not self.exact_arrive(x) or not runs_on(x.point, p1, t1):
                continue
            C = self.count(x.bar)
            waits = self.waits_before(x.bar, p2, m2, t2)
            if not waits:
                continue
            for mx, vx in instances_after(x.point, p1, m1):
                xc = AND(vx, subst(x.point.path, mx), cmp("<", _T(p1, m1), _T(x.point, mx)), subst(x.valid, mx))
                if xc is False:
                    continue
                for w, mw, wc in waits:
                    terms.append(AND(xc, wc, cmp("<", subst(x.index, mx), (subst(w.phase, mw) + 1) * C)))
        return OR(*terms)

    def landed(self, y, my, p2, m2, thread=None):
        """Bool term: bulk copy instance y (renamed by my) has landed and is visible at p2's instance (to
        `thread`; None: to every thread of p2's point)."""
        if not self.exact_copy(y):
            return False
        C = self.count(y.bar)
        yc = subst(AND(y.arr_valid), my)
        terms = []
        for w, mw, wc in self.waits_before(y.bar, p2, m2, thread):
            terms.append(AND(yc, wc, cmp("<", subst(y.arr, my), (subst(w.phase, mw) + 1) * C)))
        return OR(*terms)

    def landed_two_hops(self, y, my, p2, m2):
        """Bool term: y lands, a role waits for it (W1), then arrives (X), and p2's role waits for that
        arrival (W2) before p2 (a refill after the stage was consumed)."""
        if not self.exact_copy(y):
            return False
        C1 = self.count(y.bar)
        yc = subst(y.arr_valid, my)
        terms = []
        for x in self.arrives:
            if not self.exact_arrive(x) or not concurrent(x.point, y.point):
                continue
            C2 = self.count(x.bar)
            for w2, mw2, wc2 in self.waits_before(x.bar, p2, m2):
                got = latest_counted(x.point, x.index, x.key, (subst(w2.phase, mw2) + 1) * C2)
                if got is None:
                    continue
                mx, vx = got
                xc = AND(vx, subst(x.point.path, mx), subst(x.valid, mx))
                for w1 in self.waits:
                    if w1.bar != y.bar or not in_line(w1.point.role, x.point.role):
                        continue
                    for mw1, vw1 in instances_before(w1.point, x.point, mx):
                        w1c = AND(vw1, subst(w1.point.path, mw1), cmp("<", _T(w1.point, mw1), _T(x.point, mx)))
                        terms.append(AND(yc, wc2, xc, w1c,
                                         cmp("<", subst(y.arr, my), (subst(w1.phase, mw1) + 1) * C1)))
        return OR(*terms)


# ------------------------------------------------------------------------------------------ several roles


def alternating(analysis) -> dict:
    """{bar: C} for the mbarriers (count C) that n > 1 roles arrive on in turns: each arrive op in one loop of
    its role (depth 1, step 1), the loops alike (start and stop), no arrival outside them but P before them by
    one role (a pre-release of the stages: run once each, exact indices 0 .. P - 1), and in each iteration v at
    most one op runs (their guards exclusive). Two consumer roles taking alternate k-tiles of one ring are the
    case: consumer c waits full[k % S] and releases empty[k % S] for k % 2 == c only, so with S odd stage s is
    released by each consumer in turn. Each arrival gets a label G, P + v - start in the loops (injective: one
    arrival an iteration; >= 0). Where every arrive instance with G >= C comes after a wait for phase G // C - 1
    (proved as for `multi_role_shares`, single-role edges only), the arrivals made when phase p completes, (p + 1)
    C of them, all have G // C <= p (one with a larger G comes after that completion), and there are at most
    (p + 1) C such labels: they are exactly the arrivals with G < (p + 1) C. So a wait for phase q is ordered after
    every arrival with G < (q + 1) C: the single-role rule with G as the index, and a label no arrival takes is
    a phase that never completes (a deadlock, which the deadlock check then reports; the labels need not be
    a prefix). Proven here, each such arrive gets G as its index (exact, `valid` True, a counter `key` of its
    own rising by one an iteration) and the mbarrier counts C arrivals per phase in `Sync.count`. Memoized per
    analysis."""
    memo = analysis.__dict__.get("_alternating")
    if memo is not None:
        return memo
    out: dict = {}
    analysis.__dict__["_alternating"] = out
    ops = analysis.__dict__.get("_arrive_ops", {})
    cands = [b for b, roles in analysis.arrive_roles.items()
             if roles and is_int(analysis.mbarriers.get(b)) and analysis.mbarriers[b] > 0]
    if not cands:
        return out
    from .vc import Solver_

    solver = Solver_(unknown="possible")
    solver.facts.update(analysis.trip_facts)
    try:
        for b in cands:
            xs = [x for x in analysis.arrives if x.bar == b]
            if len(xs) != sum(k for (bb, _), k in ops.items() if bb == b):
                continue  # an arrive op the walk did not record
            if len(analysis.arrive_roles[b]) == 1:
                # one role: only where its own indices are not exact (a release under `k >= 2`, whose guard is
                # neither prefix-closed nor periodic in a stage copy's round)
                live = [x for x in xs if x.point.path is not False]
                if all(x.valid is True for x in live) or all(always_valid(solver, x) for x in live):
                    continue
            if _alternate(solver, analysis, b, xs):
                out[b] = analysis.mbarriers[b]
    finally:
        solver.close()
    return out


_MAX_SKIP = 8  # leading iterations without an arrival that `_alternate` looks for


def _alternate(solver, analysis, b, xs) -> bool:
    live = [x for x in xs if x.point.path is not False]
    if not live:
        return False
    pre = [x for x in live if not x.point.loops]      # arrivals before the loops (a pre-release of the stages)
    inloop = [x for x in live if x.point.loops]
    if not inloop:
        return False
    L0 = None
    for x in inloop:
        if len(x.point.loops) != 1:
            return False
        L = x.point.loops[0]
        if const_of(L.step) != 1 or L.derived:
            return False
        if L0 is None:
            L0 = L
        elif repr(L.start) != repr(L0.start) or repr(L.stop) != repr(L0.stop):
            return False
    # pre-loop arrivals: one role's, each run once (path True) before that role's loop, with the exact indices
    # 0 .. P - 1 (its own count is then the count over all roles)
    if pre:
        roles = {tuple(x.point.role) for x in pre}
        if len(roles) != 1 or any(x.point.path is not True or x.valid is not True for x in pre):
            return False
        loops_of = [x.point.loops[0] for x in inloop if tuple(x.point.role) in roles]
        for x in pre:
            t = x.point.counters.get("T", 0)
            if any(solver.check(cmp(">=", t, L.base.get("T", 0)), small=False) is not None for L in loops_of):
                return False   # not before its role's loop
        if sorted(x.index for x in pre if is_int(x.index)) != list(range(len(pre))):
            return False
    P = len(pre)
    v = Var("__alt_v")

    def at(x, var):   # x's path with its loop's variable (and trip) the common one
        L = x.point.loops[0]
        return subst(x.point.path, {L.var.name: var, L.trip.name: L0.trip})

    rng = lambda var: AND(cmp(">=", var, L0.start), cmp("<", var, L0.stop))  # noqa: E731
    for i, x in enumerate(inloop):
        for y in inloop[i + 1:]:
            if solver.check(AND(rng(v), at(x, v), at(y, v)), small=False) is not None:
                return False   # two arrivals in one iteration
    # D: the first iterations without an arrival (a release of the tile before, `if k >= 2`); labels from there
    runs = OR(*(at(x, v) for x in inloop))
    D = 0
    while D < _MAX_SKIP and solver.check(AND(rng(v), cmp("<", v, L0.start + D + 1), runs), small=False) is None:
        D += 1
    C = analysis.mbarriers[b]
    base = Sync(analysis, shares={})
    saved = [(x, x.index, x.valid, x.key) for x in live]
    key = f"G:{b}"
    for x in inloop:
        L = x.point.loops[0]
        x.index, x.valid, x.key = P - D + (L.var - L.start), True, key
        L.cost[key], L.base[key] = 1, P - D
    if all(_throttled(solver, base, x, C) for x in live):
        return True
    for x, index, valid, key in saved:
        x.index, x.valid, x.key = index, valid, key
    return False


def multi_role_shares(analysis) -> dict:
    """{bar: c} for the mbarriers that n > 1 roles arrive on whose per-phase structure is proven (module
    docstring): count C = n c, every arrive valid (its index exact) wherever it runs, and every arrive
    instance with index a >= c after a wait on the same mbarrier for a phase >= a // c - 1. Proven once per
    analysis with single-role edges only (no circularity)."""
    memo = analysis.__dict__.get("_multi_role_shares")
    if memo is not None:
        return memo
    out: dict = dict(alternating(analysis))
    multi = [b for b, roles in analysis.arrive_roles.items()
             if len(roles) > 1 and is_int(analysis.mbarriers.get(b)) and b not in out]
    if multi:
        from .vc import Solver_

        base = Sync(analysis, shares={})
        solver = Solver_(unknown="possible")
        solver.facts.update(analysis.trip_facts)
        try:
            for b in multi:
                C, n = analysis.mbarriers[b], len(analysis.arrive_roles[b])
                if C <= 0 or C % n:
                    continue
                xs = [x for x in analysis.arrives if x.bar == b]
                if xs and all(_throttled(solver, base, x, C // n) for x in xs):
                    out[b] = C // n
        finally:
            solver.close()
    analysis.__dict__["_multi_role_shares"] = out
    return out


def always_valid(solver, x) -> bool:
    """Is the arrive's index (its role's arrivals before it) exact at every instance that runs?"""
    m = x.point.instance("@x")
    return solver.check(AND(subst(x.point.constraint(), m), NOT(subst(x.valid, m))), small=False) is None


def _throttled(solver, sync, x, c) -> bool:
    """Does every instance of arrive x with index a >= c come after a wait on x's mbarrier for a phase
    >= a // c - 1 (so that x's role cannot run a phase ahead)?"""
    if not always_valid(solver, x):
        return False
    mx = x.point.instance("@x")
    a = subst(x.index, mx)
    target = a // c - 1
    terms = []
    for w, mw, cond in sync.waits_before(x.bar, x.point, mx):
        terms.append(AND(cond, cmp(">=", subst(w.phase, mw), target)))
    for w in sync.waits:
        if w.bar != x.bar or in_line(w.point.role, x.point.role):
            continue
        got = _wait_for_phase(solver, w, target)
        if got is None:
            continue
        mw, vw = got
        terms.append(AND(vw, sync.sync(w.point, mw, x.point, mx)))
    q = AND(subst(x.point.constraint(), mx), cmp(">=", a, c), NOT(OR(*terms)))
    return solver.check(q, small=False) is None


def _wait_for_phase(solver, w, target):
    """(renaming, validity) of the instance of wait w (in at most one loop, its phase rising by one per
    iteration) that waits for phase `target`, or None."""
    loops = w.point.loops
    if not loops:
        return {}, AND(w.point.path, cmp("==", w.phase, target))
    if len(loops) != 1:
        return None
    L = loops[0]
    v = L.var
    slope = subst(w.phase, {v.name: v + L.step}) - w.phase
    if const_of(slope) != 1 and solver.check(AND(L.constraint(), cmp("!=", slope, 1)), small=False) is not None:
        return None
    i = target - subst(w.phase, {v.name: L.start})
    m = {v.name: L.start + i * L.step}
    return m, AND(cmp(">=", i, 0), cmp("<", i, L.trip), subst(w.point.path, m))


def fresh_count(name: str):
    """A fresh integer unknown for a query (a role's number of arrivals)."""
    return Var(name)
