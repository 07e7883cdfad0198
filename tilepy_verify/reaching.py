"""Which write a shared-memory read sees: the most recent write to the same stage, as tag alternatives.

The candidates, most recent first: writes earlier in this iteration of the innermost loop; the loop body's
writes at iterations k - step, k - 2 step, ... (a window of `stages + 1` iterations, enough for a ring of
stages written once per iteration; anything older gives an "unknown" alternative); then the same one level
out, down to the top level. A candidate is "definite" when it writes the whole stage unconditionally; the
alternative of an older candidate requires every newer definite candidate not to match (different stage or
iteration out of range), so the alternatives are exclusive and, together with the final "unknown" one,
exhaustive. The pipeline check proves separately that the most recent write has landed and is visible.

A read in one role of a tile that only another, concurrently running role writes, with bulk copies on an
mbarrier (the producer/consumer ring), is matched to the copy its wait lands (sync.py): the read's role
waits on the copies' mbarrier for phase q (one wait op, earlier in the same iteration, q non-decreasing over
iterations); the copies tied to phases <= q are visible, and the most recent of them is the latest instance
of each copy op whose issuing role had made fewer than (q + 1) * count arrivals (the latest in program order
among several copy ops). Those candidates come first; the pipeline check proves that every other write to
the stage is ordered after the read or lands before that one.
"""

from __future__ import annotations

from tilepy.symbolic import Var

from .events import arr_key
from .sync import in_line, latest_counted, sole_role, waits_in_line
from .tagterms import TOP, Alt, subst_tag
from .vc import AND, NOT, OR, cmp, const_of, in_range, subst


def candidates(walker, alloc, P):
    """[(WriteRec | None, mapping, match condition, definite)] most recent first; None = unknown."""
    out = []
    loops = P.loops
    writes = [w for w in walker.writes if w.access.alloc is alloc]
    for level in range(len(loops), -1, -1):
        prefix = loops[:level]
        inner = loops[level] if level < len(loops) else None
        # this iteration of the loops in `prefix`, before P (or before entering `inner`)
        for w in reversed(writes):
            wl = w.point.loops
            if tuple(wl[:level]) != tuple(prefix):
                continue
            if len(wl) > level and wl[level] is inner:
                continue  # handled at the deeper level
            if len(wl) == level:
                out.append((w, {}, w.point.path, _definite(w)))
            else:  # a loop that already finished: its last write to the stage is from some iteration
                m = {}
                conds = []
                for lp in wl[level:]:
                    k, t = Var(f"{lp.var.name}~w{id(w)}"), Var(f"{lp.trip.name}~w{id(w)}")
                    m[lp.var.name], m[lp.trip.name] = k, t
                conds = [subst(lp.constraint(), m) for lp in wl[level:]]
                out.append((w, m, AND(subst(w.point.path, m), *conds), False))
        if level == 0:
            break
        L = loops[level - 1]
        if not any(x.access.alloc is alloc for x in L.writes):
            continue  # no iteration of L writes the tile: a read in L sees what was there when L began
        window = max(alloc.stages, 1) + 1
        for d in range(1, window + 1):
            shifted = L.var - d * L.step
            valid = cmp(">=", shifted, L.start)
            for w in reversed([x for x in L.writes if x.access.alloc is alloc]):
                wl = w.point.loops
                if tuple(wl[:level]) != tuple(prefix):
                    continue
                m = {L.var.name: shifted}
                conds = [valid]
                definite = _definite(w) and len(wl) == level
                for lp in wl[level:]:
                    k, t = Var(f"{lp.var.name}~d{d}"), Var(f"{lp.trip.name}~d{d}")
                    m[lp.var.name], m[lp.trip.name] = k, t
                    conds.append(subst(lp.constraint(), m))
                out.append((w, m, AND(subst(w.point.path, m), *conds), definite))
        beyond = cmp(">=", L.var - (window + 1) * L.step, L.start)
        out.append((None, {}, beyond, True))
    return out


def _monotone(walker, w) -> bool:
    """The wait's phase never decreases from one iteration of its (only) loop to the next."""
    if not w.point.loops:
        return True
    if len(w.point.loops) != 1:
        return False
    L = w.point.loops[0]
    prev = subst(w.phase, {L.var.name: L.var - L.step})
    q = AND(L.constraint(), cmp(">=", L.var - L.step, L.start), cmp(">", prev, w.phase))
    return walker.solve(q) is None


def _the_wait(walker, bar, P):
    """The wait op on `bar` whose phase is the highest the read's role has seen complete at P (module doc), or
    None. One wait op on it in the role's line: that wait, earlier in the same iteration, its phase never
    decreasing. Several: the latest of those earlier in the same iteration whose phase is the highest of every
    execution of every one of them before P (`_highest`); a later wait for an older phase (which returns at once)
    does not hide the copies an earlier one made visible."""
    A = walker.A
    waits = [x for x in walker.mwaits if x.bar == bar and in_line(x.point.role, P.role)]  # so far
    if waits_in_line(A, bar, P.role) == 1:
        if len(waits) != 1 or waits[0].phase is None or tuple(waits[0].point.loops) != tuple(P.loops):
            return None
        return waits[0] if _before(walker, waits[0], P) and _monotone(walker, waits[0]) else None
    for W in reversed([x for x in waits if tuple(x.point.loops) == tuple(P.loops) and x.phase is not None
                       and x.point.path is not False]):  # (a wait under a guard the walk folded to False: none)
        if _before(walker, W, P) and _highest(walker, W, P, waits):
            return W
    return None


def _before(walker, W, P) -> bool:
    """W comes before P in every iteration where P runs."""
    earlier = cmp("<=", P.counters.get("T", 0), W.point.counters.get("T", 0))  # W not before P: unsat
    return walker.solve(AND(P.constraint(), earlier)) is None


def _highest(walker, W, P, waits) -> bool:
    """With several wait ops on the copies' mbarrier in the read's line (a tile's prologue waiting on its first
    stage before the ring: gemm_persistent DEFER=2): no execution of any of them before the read, W's own in
    earlier iterations included, waits for a higher phase than W at the read's iteration. Then W's phase q is
    the highest the read's role has seen complete, and the copies tied to later phases are not visible through
    it, as with one monotone wait. `waits`: the wait ops on the mbarrier in the line so far (program order);
    those later in the body of P's loop run before P in earlier iterations: the loop's first walk recorded
    them (Loop.mwaits). Only a read in at most one loop, the waits in it or before it; anything else is not
    proven (False)."""
    loops = tuple(P.loops)
    if len(loops) > 1:
        return False
    L = loops[0] if loops else None
    q = W.phase
    bad = []
    for x in waits:  # before P in program order
        if x is W:
            continue
        xl = tuple(x.point.loops)
        if x.phase is None:
            return False
        if xl == loops:  # this iteration (earlier ones below, with the loop's other waits)
            bad.append(AND(x.point.path, cmp(">", x.phase, q)))
        elif L is None or L not in xl:  # before P's loop: at top level or in a loop that has finished
            m = x.point.instance("~hi")
            bad.append(AND(subst(x.point.constraint(), m), cmp(">", subst(x.phase, m), q)))
        else:
            return False  # in a loop nested in P's
    if L is not None:
        step = const_of(L.step)
        if step is None or step <= 0 or L.mwaits is None:  # (None: the loop's first walk, not known yet)
            return False
        for x in L.mwaits:  # every wait op of the loop's body, at an earlier iteration
            if x.bar != W.bar or not in_line(x.point.role, P.role):
                continue
            if x.phase is None or tuple(x.point.loops) != loops:
                return False
            m = x.point.instance("~hi")
            bad.append(AND(subst(x.point.constraint(), m), cmp("<", m[L.var.name], L.var),
                           cmp(">", subst(x.phase, m), q)))
    return walker.solve(AND(P.constraint(), W.point.path, OR(*bad))) is None


def _own_later(alloc, P) -> bool:
    """Does the read's own role write `alloc` in the body of a loop around it (known after the loop's first
    walk)?"""
    return any(w.access.alloc is alloc and in_line(w.point.role, P.role) for L in P.loops for w in L.writes)


def cross_role(walker, alloc, P, stage):
    """[(WriteRec, mapping, match, definite)] of the bulk copies of another role a read at P sees (see the
    module doc), most recent first; [] when the pattern does not apply (the general chain decides). The
    caller also requires `not _own_later(alloc, P)`."""
    A = walker.A
    writes = [w for w in walker.writes if w.access.alloc is alloc]
    own = [w for w in writes if in_line(w.point.role, P.role)]
    cross = [w for w in writes if not in_line(w.point.role, P.role)
             and not (const_of(w.access.stage) is not None and const_of(stage) is not None
                      and const_of(w.access.stage) != const_of(stage))]  # another stage: never the one read
    if own or not cross or len({tuple(w.point.role) for w in cross}) != 1:
        return []
    found = []
    for w in cross:
        acc = w.access
        bar = acc.bar
        if acc.kind != "async" or bar is None or acc.arr is None or A.mbarriers.get(bar) is None:
            return []
        if sole_role(A, bar) != tuple(acc.point.role):
            return []
        W = _the_wait(walker, bar, P)
        if W is None:
            return []
        C = A.mbarriers[bar]
        got = latest_counted(acc.point, acc.arr, arr_key(bar, acc.point.role), (W.phase + 1) * C)
        if got is None:
            return []
        m, valid = got
        wstage = subst(acc.stage, m) if m else acc.stage
        cond = AND(W.point.path, valid, subst(acc.point.path, m), subst(acc.arr_valid, m), cmp("==", wstage, stage))
        found.append((w, m, cond, subst(acc.point.counters.get("T", 0), m)))
    out = newest_of(found)
    # a definite candidate that matches whenever the read runs hides everything older: stop the chain there
    return ended_by_definite(walker, P, out) or out


def newest_of(found: list) -> list:
    """Candidates (w, m, cond, t) -> (w, m, cond and no other matching candidate is newer than t, definite)."""
    out = []
    for i, (w, m, cond, t) in enumerate(found):
        newest = [OR(NOT(c2), cmp("<", t2, t)) for j, (_, _, c2, t2) in enumerate(found) if j != i]
        out.append((w, m, AND(cond, *newest), _definite(w)))
    return out


def ended_by_definite(walker, P, out: list):
    """The chain up to the first definite candidate that matches wherever the read P runs, closed by the
    sentinel that hides everything older; None if there is none."""
    for i, (_w, _m, cond, definite) in enumerate(out):
        if definite and walker.solve(AND(P.constraint(), NOT(cond))) is None:
            return out[:i + 1] + [(None, {}, False, True)]
    return None


def reaching_tag(walker, ref, acc):
    """callable(coords) -> [Alt] for a read `acc` of `ref` (see module doc)."""
    stage = ref.stage if ref.stage is not None else 0
    cross = cross_role(walker, ref.alloc, acc.point, stage)
    base = candidates(walker, ref.alloc, acc.point)
    if not cross:
        return _tag_of(_summary(walker, base, acc, stage), acc, stage)
    if cross[-1][0] is None:  # the cross-role candidates cover every execution of the read
        base = []
    if walker.recording:  # the loops around the read were walked once: their writes are known
        return _tag_of(base if _own_later(ref.alloc, acc.point) else cross + base, acc, stage)
    # first walk of a loop: its writes are known once the walk is done, when the tag is asked for
    memo = []

    def tag(coords):
        if not memo:
            memo.append(_tag_of(base if _own_later(ref.alloc, acc.point) else cross + base, acc, stage))
        return memo[0](coords)

    return tag


# A view's frame says where its coordinates sit in the allocation's: one entry per allocation axis d,
# (k, off, n): coordinate d is c[k] + off with c[k] in [0, n), or (None, off, 1): coordinate d is off.
def frame_of(shape) -> tuple:
    return tuple((d, 0, n) for d, n in enumerate(shape))


def frame_permute(frame, dims) -> tuple:
    """Frame of the parent's axes permuted (axis k of the view is axis dims[k] of the parent)."""
    where = {j: k for k, j in enumerate(dims)}
    return tuple((where[k], off, n) if k is not None else (None, off, n) for k, off, n in frame)


def frame_window(frame, starts, sizes, squeeze) -> tuple:
    """Frame of the parent's window at `starts` (squeezed axes fixed at their start)."""
    kept = {j: i for i, j in enumerate(j for j, q in enumerate(squeeze) if not q)}
    out = []
    for k, off, n in frame:
        if k is None:
            out.append((None, off, n))
        elif squeeze[k]:
            out.append((None, off + starts[k], 1))
        else:
            out.append((kept[k], off + starts[k], sizes[k]))
    return tuple(out)


def _to_base(frame, coords):
    return tuple(coords[k] + off if k is not None else off for k, off, _ in frame)


def reframe(coords, frame_from, frame_to):
    """(coordinates in view `frame_to`, condition that the element is inside that view) of the element at
    `coords` of view `frame_from` (None: the allocation itself)."""
    if frame_from == frame_to:
        return coords, True
    base = tuple(coords) if frame_from is None else _to_base(frame_from, coords)
    if frame_to is None:
        return base, True
    out, inside = [None] * sum(1 for k, _, _ in frame_to if k is not None), []
    for b, (k, off, n) in zip(base, frame_to):
        if k is None:
            inside.append(cmp("==", b, off))
        else:
            out[k] = b - off
            inside.append(in_range(b - off, 0, n))
    return tuple(out), AND(*inside)


def _definite(w) -> bool:
    """The write covers the whole stage, unmasked."""
    return not w.access.partial and not w.access.window


def _whole_window(w) -> bool:
    """An unmasked write through a window: it writes every element of its window."""
    return w.access.window and not w.access.partial


def _summary(walker, chain, acc, stage):
    """The chain reduced to the writes that can reach this read: a loop invariant of the ring, computed once
    per read instead of once per element query. An entry whose match condition cannot hold where the read
    runs (another stage at that distance, an iteration before the loop's start) is dropped; a definite
    entry that matches wherever the read runs and no newer entry matched ends the chain (everything older
    is hidden). Both keep exactly the satisfiable alternatives, so the tags are unchanged, only fewer."""
    if not walker.recording or len(chain) < 3:
        return chain
    where = acc.point.constraint()
    out, newer = [], []
    for entry in chain:
        w, m, cond, definite = entry
        match = cond if w is None else AND(cond, cmp("==", subst(w.access.stage, m) if m else w.access.stage, stage))
        if match is False or walker.solve(AND(where, *newer, match)) is None:
            continue  # never the most recent write here
        out.append(entry)
        if definite:
            if walker.solve(AND(where, *newer, NOT(match))) is None:
                # always matches when nothing newer did: nothing older reaches the read, and some definite entry
                # matches wherever it runs (the closing entry: _tag_of gives no "nothing wrote it" alternative)
                return out + [(None, {}, False, True)]
            newer.append(NOT(match))
    return out


def _tag_of(chain, acc, stage):
    span = acc.span
    closed = bool(chain) and chain[-1][0] is None and chain[-1][2] is False
    # when no write reaches an element of the read (uninitialized shared memory): a pipeline hazard of its own
    not_before = []
    shape = [int(c.max()) + 1 if c.size else 1 for c in acc.coords]
    cv = tuple(Var(f"uc{d}#{acc.id}") for d in range(len(acc.coords)))
    for w, m, cond, definite in chain:
        match = cond if w is None else AND(cond, cmp("==", subst(w.access.stage, m) if m else w.access.stage, stage))
        if definite:
            not_before.append(NOT(match))
        elif w is not None and _whole_window(w):
            not_before.append(NOT(AND(match, reframe(cv, acc.frame, w.access.frame)[1])))
    acc.uninit = AND(*not_before, *(in_range(c, 0, n) for c, n in zip(cv, shape)))

    def tag(coords):
        alts = []
        not_before = []
        for w, m, cond, definite in chain:
            if w is None:
                match = cond
                alts.append(Alt(AND(match, *not_before), TOP, span))
            else:
                wstage = subst(w.access.stage, m) if m else w.access.stage
                match = AND(cond, cmp("==", wstage, stage))
                wc, inside = reframe(coords, acc.frame, w.access.frame)
                if match is not False:
                    for a in w.tag(wc):
                        c = AND(match, inside, *not_before, subst(a.cond, m) if m else a.cond)
                        if c is not False:
                            alts.append(Alt(c, subst_tag(a.tag, m) if m else a.tag, a.src or w.access.span))
                if not definite and _whole_window(w):  # hides older writes of the elements it covers
                    not_before.append(NOT(AND(match, inside)))
            if definite:
                not_before.append(NOT(match))
        # nothing wrote the stage: uninitialized shared memory (not where the chain is closed: a definite write
        # matches wherever the read runs, ended_by_definite / _summary, so that condition cannot hold)
        if not closed:
            alts.append(Alt(AND(*not_before), TOP, span))
        return [a for a in alts if a.cond is not False]

    return tag
