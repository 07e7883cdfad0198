"""Deadlocks of mbarrier protocols: a wait that can never return.

An mbarrier `b` with arrival count C completes phase q at its ((q + 1) C)-th arrival; where one role arrives
on `b` (sync.py), the arrivals it made before an arrive op are a symbolic counter, affine in the loop
indices, so "the arrive op instance that completes phase q" is a term: the latest instance X of an arrive
op whose index is (q + 1) C - 1. Two kinds of deadlock, each for all loop iterations and blocks at once:

* **missing arrival**: for an instance of `mbarrier_wait(b, q)` (q >= 0; a negative phase returns at once)
  no arrive op has an instance with that index that runs (too few arrivals, a wrong count, a guard that
  skips it);
* **cycle of waits**: the arrival exists, but its role only gets there after a wait of its own that needs
  an arrival the first role makes after the first wait. Two roles (A waits at W for B's arrive X; B waits at
  W2 before X for A's arrive X2, which comes after W in A's program order) or one role (W needs an arrival
  its own role makes later). The counterexample names the roles, both waits with their mbarriers, phases,
  iterations and lines. Longer cycles (A waits for B, B for C, ..., the last for an arrival A makes after
  its wait) are searched the same way, hop by hop, through every role; the counterexample names
  every role, wait, mbarrier, phase, iteration and line of the ring.

An mbarrier that several roles arrive on (count C; phase q completes at the ((q + 1) C)-th arrival summed
over all of them) deadlocks a wait on phase q when, for fresh unknowns a_R (one per arriving role R), the
arrive instance with R's index a_R is missing (R never makes that many arrivals) or blocked (it comes after
the wait in R's own line, or after a chain of waits that closes at an arrival the waiting role makes after
its wait, as above), and sum_R a_R < (q + 1) C: each role makes at most a_R arrivals before the wait returns,
too few together. The counterexample names every role with its a_R (missing or blocked, and the blocking
wait), the mbarrier, the phase, the iteration and the lines. A role whose arrive ops are not exact (an index
not affine, a guard that is not prefix-closed) makes the wait unchecked (no finding rather than a false one).
`tp.barrier()` under thread-dependent control flow is the `barrier_divergence` check; the named barriers the
backend emits inside a role cover exactly the role's threads, which run the role's body uniformly.
"""

from __future__ import annotations

from tilepy.symbolic import Var

from ..counterexample import block_of, instance, iteration_of, rename, thread_fields
from ..report import Finding
from ..sync import Sync, alternating, always_valid, fresh_count, in_line, instances_before, latest_counted, sole_role
from ..vc import AND, NOT, OR, cmp, linear_form, subst
from .tickets import none_quick_then_linear


def check(ctx) -> list:
    A = ctx.analysis
    sync = Sync(A)
    out, reported = [], set()
    single = []
    for w in sync.waits:
        C = A.mbarriers.get(w.bar)
        role = sole_role(A, w.bar)
        if C is None:
            continue
        if role is None and A.arrive_roles.get(w.bar) and w.bar not in alternating(A):
            got = _several_roles(ctx, sync, w, C)
            if got is not None:
                out.append(got)
            continue
        single.append((w, C, _single_role(ctx, sync, w, C)))
    # The waits of one source line (one wait per stage of an mbarrier ring, mbarrier_arrays.py) are asked
    # together: one query for a missing arrival and one for a cycle over all of them, then one by one only
    # where one has a model.
    groups: dict = {}
    for item in single:
        groups.setdefault(item[0].span, []).append(item)
    # Each disjunction is asked as it is for a moment first; where Z3 does not settle it (products or run-time
    # divisions: a persistent ring's phases), each wait's and each cycle's linear abstraction with its own
    # lemmas (tickets.none_quick_then_linear): Z3's nonlinear search on the disjunction of a flat ring's
    # cycles took 45-60 s.
    for group in groups.values():
        missing = [AND(reached, NOT(OR(*done))) for _, _, (_, reached, done, _) in group]
        cyc = [AND(reached, c) for _, _, (_, reached, _, cycles) in group for c, _, _ in cycles]
        if (none_quick_then_linear(ctx, missing, missing)
                and none_quick_then_linear(ctx, [AND(reached, OR(*(c for c, _, _ in cycles)))
                                                 for _, _, (_, reached, _, cycles) in group if cycles], cyc)):
            continue
        for w, C, (mw, reached, done, cycles) in group:
            _single_findings(ctx, w, C, mw, reached, done, cycles, out, reported)
    return out


def _single_role(ctx, sync, w, C):
    """(renaming, reached, done, cycles) of a wait on an mbarrier one role arrives on: the wait's instance
    is reached, some arrive instance completes its phase (each of `done`), a cycle of waits blocks that
    arrive (each of `cycles`: (term, arrive, further hops))."""
    A = ctx.analysis
    mw, cw = instance(w.point, "@1")
    q = rename(w.phase, mw)
    need = (q + 1) * C  # arrivals that complete phase q
    done, cycles = [], []
    for x in A.arrives:
        if x.bar != w.bar or not sync.exact_arrive(x):
            continue
        got = latest_counted(x.point, x.index, x.key, need)
        if got is None:
            done = [True]
            cycles = []
            break
        mx, vx = got
        hit = AND(vx, subst(x.point.path, mx), subst(x.valid, mx), cmp("==", subst(x.index, mx), need - 1))
        done.append(hit)
        cycles += [(AND(hit, c), x, extra) for c, extra in _blocked_before(ctx, sync, w, mw, x, mx)]
    reached = AND(cw, cmp(">=", q, 0))
    return mw, reached, done, cycles


def _single_findings(ctx, w, C, mw, reached, done, cycles, out, reported):
    """The findings of one wait on an mbarrier one role arrives on (`_single_role`), appended to `out`."""
    model = ctx.solver.check(AND(reached, NOT(OR(*done))))
    if model is not None:
        out.append(_finding(ctx, w, mw, model, C, None, done))
        return
    if not cycles or ctx.solver.check(AND(reached, OR(*(c for c, _, _ in cycles))), small=False) is None:
        return  # one query rules out every cycle through this wait (the usual answer)
    for cond, x, extra in cycles:
        pair = frozenset([str(w.span)] + [str(h[0].span) for h in extra or []])
        if pair in reported:  # the same cycle seen from its other wait
            break
        model = ctx.solver.check(AND(reached, cond))
        if model is not None:
            reported.add(pair)
            out.append(_finding(ctx, w, mw, model, C, (x, extra), done))
            break


def _several_roles(ctx, sync, w, C):
    """A deadlock finding for wait w on an mbarrier several roles arrive on, or None (module doc)."""
    A = ctx.analysis
    mw, cw = instance(w.point, "@1")
    q = rename(w.phase, mw)
    need = (q + 1) * C
    memo = ctx.__dict__.setdefault("_deadlock_valid", {})
    roles = sorted(A.arrive_roles[w.bar], key=repr)
    counts, per_role, blockers = [], [], []
    for i, R in enumerate(roles):
        a = fresh_count(f"__arrivals{i}@1")
        xs = [x for x in A.arrives if x.bar == w.bar and tuple(x.point.role) == R]
        missing, blocked = [], []
        for x in xs:
            if id(x) not in memo:
                memo[id(x)] = always_valid(ctx.solver, x)
            got = latest_counted(x.point, x.index, x.key, a + 1) if memo[id(x)] else None
            if got is None:
                return None  # this role's arrivals are not exact: unchecked
            mx, vx = got
            hit = AND(vx, subst(x.point.path, mx), cmp("==", subst(x.index, mx), a))
            missing.append(NOT(hit))
            for c, extra in _blocked_before(ctx, sync, w, mw, x, mx):
                blocked.append((AND(hit, c), x, extra))
        counts.append(a)
        per_role.append((R, a, AND(*missing), blocked))
        blockers.append(AND(cmp(">=", a, 0), OR(AND(*missing), *(c for c, _, _ in blocked))))
    total = counts[0]
    for a in counts[1:]:
        total = total + a
    query = AND(cw, cmp(">=", q, 0), cmp("<", total, need), *blockers)
    model = ctx.solver.check(query)
    if model is None:
        return None
    return _several_finding(ctx, w, mw, model, C, per_role)


def _wait_facts(ctx, w, mw, model):
    """(analysis, warp size, the waiting role's first thread, phase, mbarrier, iterations, who) of a wait in a
    model: what every deadlock finding names."""
    A = ctx.analysis
    t = w.point.threads
    first = int(t[0]) if t is not None and len(t) else 0
    q = ctx.eval(rename(w.phase, mw), model)
    return (A, A.target.warp_size, first, q, w.bar.removeprefix("mbar:"), iteration_of(w.point, model, "@1"),
            _roles(w.point))


def _several_finding(ctx, w, mw, model, C, per_role):
    A, ws, first, q, bar, its, who = _wait_facts(ctx, w, mw, model)
    parts, names, spans = [], [], []
    for R, a, _missing, blocked in per_role:
        n = _eval_or_none(ctx, a, model)
        xs = [x for x in A.arrives if x.bar == w.bar and tuple(x.point.role) == R]
        rname = _roles(xs[0].point) if xs else "?"
        names.append(rname)
        why = None
        for cond, x, extra in blocked:
            if _holds(ctx, cond, model):
                spans.append((n if isinstance(n, int) else 1 << 30, x.span))
                why = (f"its arrival number {_plus1(n)} (line {x.span.line}) comes only after "
                       + ("this wait in its own program order" if extra is None else
                          f"its wait at line {extra[0][0].span.line} on '{extra[0][0].bar.removeprefix('mbar:')}', "
                          f"which needs {who} past line {w.span.line}"))
                break
        if why is None:
            line = xs[0].span.line if xs else "?"
            if xs:
                spans.append((n if isinstance(n, int) else 1 << 30, xs[0].span))
            why = f"it never makes arrival number {_plus1(n)} (arrive at line {line})"
        parts.append(f"{rname} can make at most {n} arrivals: {why}")
    other = min(spans, key=lambda t: t[0])[1] if spans else None  # the role that falls shortest
    cex = {"block": block_of(model), **thread_fields(first, ws), "iteration": its, "phase": q, "barrier": bar,
           "roles": (who,) + tuple(names)}
    cex["detail"] = (f"{who} wait at line {w.span.line}, iteration {its or '(before loops)'}, for phase {q} of "
                     f"'{bar}' (count {C}, arrived on by {len(per_role)} roles), which needs {(q + 1) * C} "
                     f"arrivals in all; " + "; ".join(parts))
    msg = (f"deadlock: mbarrier_wait on '{bar}' (arrived on by {len(per_role)} roles) can wait for a phase "
           "that never completes: the roles together arrive too few times")
    return Finding("deadlock", "error", msg, w.span, cex, other)


def _plus1(n):
    return n + 1 if isinstance(n, int) else "?"


def _holds(ctx, cond, model) -> bool:
    try:
        return bool(ctx.eval(cond, model))
    except Exception:  # noqa: BLE001 - a variable the model does not bind
        return False


MAX_ROLES = None  # cycles through up to this many roles are searched (None: through every role)


def _blocked_before(ctx, sync, w, mw, x, mx):
    """[(condition, hops or None)]: arrive instance x (renamed by mx) that w needs only comes after w itself
    in one role (hops None), or after a chain of waits through other roles that closes at an arrival w's
    role makes after w: hops [(w2, mw2, x2, mx2), ...], w2 in x's role before x waiting for x2, and so on,
    the last x in w's role (two roles: one hop; a simple cycle visits each role once, so searching as many
    hops as there are roles finds every one)."""
    out = []
    tw = subst(w.point.counters.get("T", 0), mw)
    if in_line(x.point.role, w.point.role):  # one role: the arrival it waits for is its own, later
        out.append((cmp(">", subst(x.point.counters.get("T", 0), mx), tw), None))
        return out
    roles = {tuple(v.point.role) for v in list(sync.waits) + list(ctx.analysis.arrives)}
    limit = len(roles) if MAX_ROLES is None else min(MAX_ROLES, len(roles))
    out += _chain(ctx, sync, w, tw, x, mx, [tuple(w.point.role)], max(1, limit - 1), first=True,
                  held=[(tuple(w.point.role), tw)], single=True)
    return out


def _chain(ctx, sync, w, tw, x, mx, visited, depth, first=False, held=None, single=False):
    """Hops from arrive instance x: a wait w2 of x's role before x, the arrive x2 that completes the phase
    w2 needs; closing where x2 is in w's role after w, else on through x2's role (a role not yet visited).
    The first hop tries the latest three executions of w2 before x; later hops the latest one (this
    iteration where w2 comes before x in the loop body, else the previous one), which keeps a ring's
    disjunction linear in its length (a chain through an earlier execution is not found: a missed
    deadlock at worst, never a false one). In a ring unrolled per stage these are iterations of the loop as
    written, not rounds of the copies (`_copy_lags`).

    `single`: every hop so far through an mbarrier one role arrives on; then the chain closes only in w's own
    role. A cycle that closes in an earlier hop's role (w2's: w2 waits for x2, whose role waits before x2 for an
    arrival w2's role makes after w2) does not pass through w: it is the cycle of w2's own check, whose first hop
    tries the latest three executions of the next wait where this chain's later hop tries one, and which covers
    every execution of w2 (a deadlock there is reported at w2). gemm_persistent DEFER=2: 384 of a producer
    wait's 444 cycles closed in the consumers (consumer -> store warp -> consumer), each also the consumers' own."""
    A = ctx.analysis
    out = []
    held = held if held is not None else [(tuple(w.point.role), tw)]
    for w2 in sync.waits:
        if w2 is w or not in_line(w2.point.role, x.point.role) or any(in_line(w2.point.role, r) for r in visited):
            continue
        C2 = A.mbarriers.get(w2.bar)
        turns = w2.bar in alternating(A)  # roles arriving in turns: one index over them all (sync.alternating)
        several = sole_role(A, w2.bar) is None and bool(A.arrive_roles.get(w2.bar)) and not turns
        if C2 is None or (sole_role(A, w2.bar) is None and not several and not turns) or not _can_precede(ctx, w2, x):
            continue
        tried = instances_before(w2.point, x.point, mx, depth=3 if first else 2)
        lags = _copy_lags(ctx, w2, x, len(tried), first)
        if lags is not None:
            tried = [t for d, t in enumerate(tried) if d in lags]
        elif not first and len(tried) == 2:
            tried = tried[:1] if _precedes(ctx, w2, x) else tried[1:]
        for mw2, vw2 in tried:
            order = cmp("<", subst(w2.point.counters.get("T", 0), mw2), subst(x.point.counters.get("T", 0), mx))
            before_x = AND(vw2, subst(w2.point.path, mw2), order)
            if before_x is False:
                continue
            if several:
                got = _several_hop(ctx, sync, w, tw, w2, mw2, visited, depth, held)
                if got is not None:
                    cond, hop = got
                    out.append((AND(before_x, cond), [hop]))
                continue
            need2 = (subst(w2.phase, mw2) + 1) * C2
            for x2 in A.arrives:
                if x2.bar != w2.bar or not sync.exact_arrive(x2):
                    continue
                # x2 closes the chain where its role waits in it (w's role, or an earlier hop's): it comes
                # after that wait, which is held back itself
                held_at = [t for r, t in (held[:1] if single else held) if in_line(x2.point.role, r)]
                closes = bool(held_at)
                if not closes and (depth <= 1 or in_line(x2.point.role, w2.point.role)
                                   or any(in_line(x2.point.role, r) for r in visited)):
                    continue
                got = latest_counted(x2.point, x2.index, x2.key, need2)
                if got is None:
                    continue
                mx2, vx2 = got
                hit2 = AND(vx2, subst(x2.point.path, mx2), subst(x2.valid, mx2),
                           cmp("==", subst(x2.index, mx2), need2 - 1))
                base = AND(before_x, cmp(">=", subst(w2.phase, mw2), 0), hit2)
                hop = (w2, mw2, x2, mx2)
                if closes:
                    tx2 = subst(x2.point.counters.get("T", 0), mx2)
                    out.append((AND(base, OR(*(cmp(">", tx2, t) for t in held_at))), [hop]))
                    continue
                tw2 = subst(w2.point.counters.get("T", 0), mw2)
                for c, rest in _chain(ctx, sync, w, tw, x2, mx2, visited + [tuple(w2.point.role)], depth - 1,
                                      held=held + [(tuple(w2.point.role), tw2)], single=single):
                    out.append((AND(base, c), [hop] + rest))
    return out


def _several_hop(ctx, sync, w, tw, w2, mw2, visited, depth, held):
    """(condition, hop) for a hop through a wait w2 (renamed by mw2) on an mbarrier several roles arrive on:
    its phase needs (q2 + 1) C arrivals summed over the roles, and, for fresh per-role counts a_R whose sum
    falls short, each role R's arrival with index a_R is missing (R never makes that many) or held back by
    a wait of the cycle: R is in the line of a role that waits in it (w's role, w2's own, or an earlier
    hop's) and the arrival comes after that wait, or it comes after a further chain of waits that closes at
    an arrival w's role makes after w. Every wait of the cycle then needs an arrival made only after a wait
    of the cycle: none returns first. A role whose arrive indices are not exact gives no hop (a missed
    deadlock at worst). hop = (w2, mw2, x, mx, counts): x, mx the first role's arrive that the model holds
    back, counts [(role name, a_R term)] for the counterexample."""
    A = ctx.analysis
    C2 = A.mbarriers.get(w2.bar)
    q2 = subst(w2.phase, mw2)
    need2 = (q2 + 1) * C2
    memo = ctx.__dict__.setdefault("_deadlock_valid", {})
    held = held + [(tuple(w2.point.role), subst(w2.point.counters.get("T", 0), mw2))]
    n = ctx.__dict__["_deadlock_hops"] = ctx.__dict__.get("_deadlock_hops", 0) + 1
    total, roles, counts, rep = None, [], [], None
    for i, R in enumerate(sorted(A.arrive_roles[w2.bar], key=repr)):
        a = fresh_count(f"__hop{n}_{i}@1")
        xs = [x for x in A.arrives if x.bar == w2.bar and tuple(x.point.role) == R]
        if not xs:
            return None
        missing, blocked = [], []
        for x in xs:
            if id(x) not in memo:
                memo[id(x)] = always_valid(ctx.solver, x)
            got = latest_counted(x.point, x.index, x.key, a + 1) if memo[id(x)] else None
            if got is None:
                return None  # this role's arrivals are not exact: no hop
            mx, vx = got
            hit = AND(vx, subst(x.point.path, mx), cmp("==", subst(x.index, mx), a))
            missing.append(NOT(hit))
            tx = subst(x.point.counters.get("T", 0), mx)
            for role, t in held:
                if in_line(tuple(x.point.role), role):
                    blocked.append(AND(hit, cmp(">", tx, t)))
            if depth > 1 and not any(in_line(tuple(x.point.role), r) for r, _ in held):
                for c, _rest in _chain(ctx, sync, w, tw, x, mx, visited + [tuple(w2.point.role)], depth - 1,
                                       held=held):
                    blocked.append(AND(hit, c))
        if rep is None:
            rep = (xs[0], {})
        roles.append(AND(cmp(">=", a, 0), OR(AND(*missing), *blocked)))
        counts.append((_roles(xs[0].point), a))
        total = a if total is None else total + a
    cond = AND(cmp(">=", q2, 0), cmp("<", total, need2), *roles)
    if cond is False:
        return None
    return cond, (w2, mw2, rep[0], rep[1], counts)


def _can_precede(ctx, w2, x) -> bool:
    """Whether some execution of w2 can come before some execution of x (False only where none can): with no loop
    around both, w2's statement counter at its loops' first iterations (its least) and x's at their last (its
    greatest) differ by a constant, w2 never before x where it is >= 0 (a wait after the loop of the arrive, or
    in a loop after an arrive made before it: a ring's pre-release). Every hop through such a wait asked the
    same impossible order again, under more conditions (gemm_persistent DEFER=2: 148 of a producer wait's 180
    cycles at 4 stages)."""
    if _common_loops(w2.point.loops, x.point.loops):
        return True
    first = subst(w2.point.counters.get("T", 0), {lp.var.name: lp.start for lp in w2.point.loops})
    last = subst(x.point.counters.get("T", 0),
                 {lp.var.name: lp.start + (lp.trip - 1) * lp.step for lp in x.point.loops})
    lin = linear_form(first - last)
    if lin is None:
        return True
    # (a loop's trip count is >= 0: the counter after a loop is its entry value plus trip * cost)
    rest = [c for a, c in lin.items() if a != 1 and not (isinstance(a, Var) and a.name.startswith("trip#") and c >= 0)]
    return bool(rest) or lin.get(1, 0) < 0


def _common_loops(a, b) -> bool:
    return bool(a) and bool(b) and a[0] is b[0]


def _precedes(ctx, w2, x) -> bool:
    """Whether w2 comes before x in one iteration of their innermost common loop (one cached query)."""
    key = ("precedes", id(w2), id(x))
    memo = ctx.__dict__.setdefault("_deadlock_memo", {})
    if key not in memo:
        tw, tx = w2.point.counters.get("T", 0), x.point.counters.get("T", 0)
        lin = linear_form(tw - tx)
        d = lin.get(1, 0) if lin is not None and set(lin) <= {1} else None
        if d is not None and d < 0:  # the statement counters differ by a constant (one loop body): no query
            memo[key] = True
        elif d is not None:  # w2 never comes first: the query has a model wherever x's loops can run at all
            memo[key] = _never_runs(ctx, x.point.loops)
        else:
            late = cmp(">=", tw, tx)
            memo[key] = ctx.solver.check(AND(*(lp.constraint() for lp in x.point.loops), late), small=False) is None
    return memo[key]


def _copy_lags(ctx, w2, x, n, first):
    """For w2 and x in stage copies of one ring unrolled per stage (events.Point.copy: iteration S j + c of the
    loop as written, j the round): the rounds back d (instances_before's order) whose execution of w2 is one
    of the latest before x in the loop as written, as `_chain` takes them in a loop that is not unrolled: the
    latest three iterations on the first hop, the latest two on later ones (x's own iteration only where w2
    comes first in it). None where the two are not such copies (the rounds as they are).

    Without this each hop tried the latest rounds of every stage copy of a wait line, STAGES executions per
    round: a chain through three roles (two consumer rings and their producer) was STAGES^2 chains per arrive."""
    cw, cx = w2.point.copy, x.point.copy
    if cw is None or cx is None or cw[0] is not cx[0] or cw[1] != cx[1]:
        return None
    S = cw[1]
    keep = set()
    for d in range(n):
        lag = S * d + cx[2] - cw[2]  # iterations of the loop as written from w2's execution to x's
        if lag < 0 or lag > (2 if first else 1):
            continue
        if lag == 0 and not _precedes(ctx, w2, x):
            continue
        keep.add(d)
    return keep


def _never_runs(ctx, loops) -> bool:
    """Whether no iteration of `loops` (a point's enclosing loops) can run (one cached query per loop nest)."""
    key = ("never", tuple(id(lp) for lp in loops))
    memo = ctx.__dict__.setdefault("_deadlock_memo", {})
    if key not in memo:
        memo[key] = ctx.solver.check(AND(*(lp.constraint() for lp in loops)), small=False) is None
    return memo[key]


def _roles(point) -> str:
    t = point.threads
    return f"threads {int(t.min())}..{int(t.max())}" if t is not None and len(t) else "all threads"


def _finding(ctx, w, mw, model, C, cyc, done):
    A, ws, first, q, bar, its, who = _wait_facts(ctx, w, mw, model)
    cex = {"block": block_of(model), **thread_fields(first, ws), "iteration": its, "phase": q, "barrier": bar}
    here = f"{who} wait at line {w.span.line}, iteration {its or '(before loops)'}, for phase {q} of '{bar}'"
    if cyc is None:
        cex["roles"] = (who,)
        cex["detail"] = (f"{here} (count {C}), which needs {(q + 1) * C} arrivals; "
                         + ("nothing arrives on it" if not done else "the arrive ops on it never make that many"))
        other = next((x.span for x in A.arrives if x.bar == w.bar), None)
        msg = f"deadlock: mbarrier_wait on '{bar}' can wait for a phase that never completes"
        return Finding("deadlock", "error", msg, w.span, cex, other)
    x, extra = cyc
    if extra is None:
        cex["roles"] = (who,)
        cex["detail"] = (f"{here}; the arrival that completes it is the one at line {x.span.line}, which the same "
                         "threads only reach after this wait")
        msg = f"deadlock: mbarrier_wait on '{bar}' waits for an arrival its own role makes only after the wait"
        return Finding("deadlock", "error", msg, w.span, cex, x.span)
    hops = []
    for hop in extra:
        w2, mw2, x2 = hop[:3]
        h = {"role": _roles(w2.point), "barrier": w2.bar.removeprefix("mbar:"),
             "phase": _eval_or_none(ctx, subst(w2.phase, mw2), model),
             "iteration": {lp.name: _eval_or_none(ctx, subst(lp.var, mw2), model) for lp in w2.point.loops},
             "line": w2.span.line, "arrive_line": x2.span.line}
        h["how"] = f"completed by the arrive at line {x2.span.line}"
        if len(hop) > 4:  # an mbarrier several roles arrive on: the arrivals summed over them fall short
            C2 = A.mbarriers.get(w2.bar)
            need = (h["phase"] + 1) * C2 if isinstance(h["phase"], int) else "?"
            h["arrivals"] = {name: _eval_or_none(ctx, a, model) for name, a in hop[4]}
            h["how"] = (f"which needs {need} arrivals in all from {len(hop[4])} roles (count {C2}), but "
                        + ", ".join(f"{name} can make at most {n}" for name, n in h["arrivals"].items())
                        + " before the cycle's waits return")
        hops.append(h)
    first = hops[0]
    cex.update({"roles": (who,) + tuple(h["role"] for h in hops), "other_barrier": first["barrier"],
                "other_phase": first["phase"], "other_iteration": first["iteration"],
                "chain": tuple(f"{h['role']} wait at line {h['line']}, iteration {h['iteration'] or '(before loops)'}, "
                               f"for phase {h['phase']} of '{h['barrier']}' ("
                               + (f"arrive at line {h['arrive_line']}" if "arrivals" not in h else
                                  "arrived on by " + ", ".join(f"{k}: at most {v}" for k, v in h["arrivals"].items()))
                               + ")" for h in hops)})
    if len(hops) == 1:
        h = first
        cex["detail"] = (f"{here}, completed by the arrive at line {x.span.line} ({h['role']}); {h['role']} first "
                         f"wait at line {h['line']}, iteration {h['iteration'] or '(before loops)'}, for phase "
                         f"{h['phase']} of '{h['barrier']}', {h['how']}, "
                         f"which {who} reach only after line {w.span.line}: a cycle of waits")
        msg = (f"deadlock: a cycle of mbarrier waits: '{bar}' (line {w.span.line}) waits for {h['role']}, which "
               f"waits on '{h['barrier']}' (line {h['line']}) for {who}")
        return Finding("deadlock", "error", msg, w.span, cex, w2_span(extra))
    steps = [f"{here}, completed by the arrive at line {x.span.line} ({first['role']})"]
    for k, h in enumerate(hops):
        nxt = hops[k + 1]["role"] if k + 1 < len(hops) else who
        steps.append(f"{h['role']} first wait at line {h['line']}, iteration {h['iteration'] or '(before loops)'}, "
                     f"for phase {h['phase']} of '{h['barrier']}', {h['how']} ({nxt})")
    cex["detail"] = "; ".join(steps) + f", which {who} reach only after line {w.span.line}: a cycle of waits"
    ring = "".join(f", which waits on '{h['barrier']}' (line {h['line']}) for "
                   f"{hops[k + 1]['role'] if k + 1 < len(hops) else who}" for k, h in enumerate(hops))
    msg = (f"deadlock: a cycle of mbarrier waits through {len(hops) + 1} roles: '{bar}' (line {w.span.line}) "
           f"waits for {first['role']}{ring}")
    return Finding("deadlock", "error", msg, w.span, cex, w2_span(extra))


def w2_span(extra):
    return extra[0][0].span


def _eval_or_none(ctx, term, model):
    try:
        return ctx.eval(term, model)
    except Exception:  # noqa: BLE001 - a variable the model does not bind
        return None
