"""A ring of mbarrier arrays (`full[k % STAGES]`) read on the kernel as written: the tag proof's reaching writes
matched by element terms, not by unrolling the ring into STAGES copies (issue 17 item 4; switch-gated).

On by default since 2026-11-24 23:00 (`TILEPY_VERIFY_SYMBOLIC_RINGS=0`, or `symbolic_ring.ENABLED = False`, turns it
off: the tag check then runs on the stage copies everywhere, as before). The walk of the kernel
as written (the one global_race, out_of_bounds, ... already run on) names an mbarrier array's element by
(array, element term): `full[k % S]` is the mbarrier `mbar:full` with element `k % S` on the bulk copy, the wait
and the arrive (`Access.elem`, `Wait.elem`, `Arrive.elem`). A shared read whose stages another role fills by
bulk copies on such an array (the producer / consumer ring) then sees the copy its wait lands, as reaching.py's
`cross_role` does for one named mbarrier, but per element:

* the producer's arrivals on element e before its iteration k_p, every arrive op on the array being in the copy's
  loop (step 1, start a0), unconditional or under an upper bound of k the copy's guard implies (`if j < n_kv`:
  then it ran at every iteration before a copy), on element (k + d) % R (the copy's own d and R), nx of them in an
  iteration, nb before the copy: nx #{k' in [a0, k_p) : (k' + d) % R == e} + nb at the copy's iterations
  (k_p + d) % R == e, which are k_p = v0 + m R with v0 = a0 + (e - d - a0) % R the first (periodic.py's floor
  count; there it is m nx + nb);
* the wait for phase q on element e (the reader's only wait on the array in its line, earlier in the iteration,
  q non-decreasing) lands the copies issued with fewer than (q + 1) C arrivals on e; the latest of them is
  m = ((q + 1) C - 1 - nb) // nx, k_p = v0 + m R, where 0 <= m and k_p < the loop's stop;
* the copy's stage at k_p is matched to the read's stage as a term ((k1 - d1) % S == (k2 - d2) % S in the query,
  reaching._tag_of), and the chain ends there when that copy exists for every execution of the read; where the
  landed copies do not cover every execution (a copy into another stage, a wait a phase early), reaching.py's
  general chain follows them, as on the copies.

Also covered (2026-11-25, V13): several waits on the array in the reader's line under complementary guards
(`_reader_waits`: each wait's landed copy where it runs, its phase the highest its element was waited for); a
ring on constant elements in a loop over rounds (conv_tma's `static_range` stages, `_latest_constant`); arrive ops
on another element than the copy's (`_latest_mixed`, `_arrivals_ahead`); a ring the reading role fills itself
(layer_norm_ring: program order, reaching.py's chain); a cluster's multicast copies and remote arrives (`cta=`),
which the walk takes, as on the copies, for a copy into the block's own stage and an arrival on its own element
(checks/cluster.py judges the cluster side). And a ring nested in a tile loop (V12: `_tiled_latest`).

Where a read of such a ring is not of this form (a several-role array, an arrive under a condition or outside
the copy's loop, the producer walked after the reader, ...), the walk records the reason
(`Analysis.symbolic_gaps`) and the tag check runs on the stage copies as before (tilepy_verify/__init__.py, a
debug line naming the reason). The race, deadlock and pipeline_hazard checks still run on the copies (their
element matching is not done here).
"""

from __future__ import annotations

import logging
import os
from dataclasses import replace

from tilepy import ir
from tilepy.symbolic import BinOp, Var

from . import periodic
from .reaching import _monotone, _tag_of, candidates, ended_by_definite, newest_of
from .sync import in_line, sole_role, waits_in_line
from .vc import AND, NOT, OR, build_linear, cmp, const_of, linear_form, subst, term_vars

ENV = "TILEPY_VERIFY_SYMBOLIC_RINGS"
ENABLED: bool | None = None  # None: read ENV (unset or "1": on, "0": off); True / False override it (tests)

log = logging.getLogger("tilepy_verify.symbolic_ring")


def enabled() -> bool:
    if ENABLED is not None:
        return bool(ENABLED)
    return os.environ.get(ENV, "1").strip() != "0"


def ring_allocs(kir) -> set:
    """Names of the shared allocations a bulk copy on an element of an mbarrier array writes (the ring's tiles)."""
    out = set()
    for s in ir.walk(kir.body):
        if isinstance(s, ir.Eval) and s.call.op == "copy_bulk" and len(s.call.args) > 2:
            bar, dst = s.call.args[2], s.call.args[1]
            if isinstance(bar, ir.Call) and bar.op == "mbarrier_at":
                if isinstance(dst, ir.Var):
                    out.add(dst.name)
                for x in ir.walk_exprs(dst):
                    if isinstance(x, ir.Call) and x.op == "stage" and isinstance(x.args[0], ir.Var):
                        out.add(x.args[0].name)
    return out


def reaching_tag(walker, ref, acc):
    """callable(coords) -> [Alt] for a read of a ring tile (see the module doc), or None where the read is not a
    ring's (reaching.reaching_tag decides) or not of the covered form (the reason recorded as a gap; reaching.py
    then decides, and the tag check does not use this walk)."""
    ring = ref.alloc.name in walker.ring_allocs or any(
        w.access.alloc is ref.alloc and w.access.kind == "async" and w.access.bar is not None and w.access.arr is None
        for w in walker.writes)  # (a copy on an array's element so far: the tile under another name)
    if not ring or (walker.recording and walker.A.symbolic_gaps):
        return None  # not a ring's tile, or the tag check falls back already
    if _own_writes(walker, ref.alloc, acc.point, later=walker.recording):
        return None  # the reading role writes the tile (a ring it fills itself): program order, reaching.py's chain
    stage = ref.stage if ref.stage is not None else 0
    got = _cross(walker, ref.alloc, acc.point, stage)
    if isinstance(got, str):
        if walker.recording:
            span = acc.span
            walker.A.symbolic_gaps.append(f"line {getattr(span, 'line', '?')}: {got}")
        return None
    if not got:
        return None  # no wait lands a copy for the read: reaching.py's general chain, as on the copies
    if got[-1][0] is not None:  # the landed copies do not cover every execution: the general chain after them
        got = got + candidates(walker, ref.alloc, acc.point)
    if walker.recording:
        return _tag_of(got, acc, stage)
    memo = []
    base = candidates(walker, ref.alloc, acc.point)  # (the general chain as it stands at the read)

    def tag(coords):  # first walk of a loop: asked once the walk is done (its writes known then)
        if not memo:
            own = _own_writes(walker, ref.alloc, acc.point, later=True, so_far=False)
            memo.append(_tag_of(base if own else got, acc, stage))
        return memo[0](coords)

    return tag


def _offset(elem, var):
    """(d, R) where `elem` is (var + d) % R with d, R constant ints (R >= 1), else None."""
    if elem is None or not (hasattr(elem, "op") and elem.op == "%"):
        return None
    R = const_of(elem.b)
    lin = linear_form(elem.a)
    if R is None or R < 1 or lin is None or lin.get(var, 0) != 1 or set(lin) - {var, 1}:
        return None
    return lin.get(1, 0), R


def _T(point, m=None):
    t = point.counters.get("T", 0)
    return subst(t, m) if m else t


def _cross(walker, alloc, P, stage):
    """[(WriteRec, mapping, match, definite)] of the copies a read at P sees, most recent first, ending with the
    (None, {}, False, True) stop entry; or the reason (a str) the read is not of the covered form."""
    A = walker.A
    writes = [w for w in walker.writes if w.access.alloc is alloc]
    own = [w for w in writes if in_line(w.point.role, P.role)]
    cross = [w for w in writes if not in_line(w.point.role, P.role)]
    if own:
        return "the reading role writes the ring's tile too"
    if not cross:
        return "no copy of another role into the tile precedes the read in program order"
    if len({tuple(w.point.role) for w in cross}) != 1:
        return "several roles write the ring's tile"
    if len(P.loops) not in (1, 2):
        return "the read is not directly in one loop, nor in a ring loop directly in a tile loop"
    if (len(P.loops) == 2 or any(len(w.point.loops) == 2 for w in cross)) and len(cross) != 1:
        return "several copy ops write a tile loop's ring tile"
    ring = []
    for w in cross:  # the structural conditions of every copy first: a gap is then found before any query
        y = w.access
        if y.kind != "async" or y.elem is None or y.bar is None:
            return "a write of the tile that is not a bulk copy on an element of an mbarrier array"
        bar = y.bar
        C = A.mbarriers.get(bar)
        role = tuple(y.point.role)
        if C is None:
            return f"the arrival count of {bar[5:]} is not known"
        if sole_role(A, bar) != role:
            return f"{bar[5:]} is arrived on by another role than the copies' own"
        waits = _reader_waits(walker, bar, P)
        if isinstance(waits, str):
            return waits
        ring += [(w, y, bar, C, role, W) for W in waits]
        nested = len(y.point.loops) == 2  # (the read in the ring loop, or in the tile loop: DEFER=2's prologue)
        if len(y.point.loops) != len(P.loops) and not nested:
            return "the copy is not in a ring loop directly in a tile loop, as the read is" if len(P.loops) == 2 \
                else "the copy is not directly in one loop"
        if nested and any(_tiled_phase(W) is None for W in waits):
            return f"the wait's phase on {bar[5:]} is not the tile's first slot (the tile loop's index times the " \
                "rounds a tile) plus a count within the tile"
    found, asked = [], set()
    for w, y, bar, C, role, W in ring:
        if id(W) not in asked:  # (the copies of one mbarrier share its wait: asked once)
            asked.add(id(W))
            earlier = cmp("<=", _T(P), _T(W.point))
            mono = _monotone(walker, W) if len(y.point.loops) == 1 else _tiled_monotone(walker, W)
            if walker.solve(AND(P.constraint(), earlier)) is not None or not mono:
                return f"the wait on {bar[5:]} is not before the read in every iteration, or its phase decreases"
        got = _latest(walker, y, bar, role, C, W)
        if isinstance(got, str):
            return got
        for m, valid, order in got:  # (one instance; in a tile loop's ring one per tile offset, exclusive)
            wstage = subst(y.stage, m)
            cond = AND(W.point.path, valid, subst(y.point.path, m), cmp("==", wstage, stage))
            found.append((w, m, cond, _T(y.point, m) if order is None else order))
    out = newest_of(found)
    # the definite candidates that match, together, wherever the read runs hide everything older (several copy ops
    # under complementary guards: each the newest where it matches)
    ended = ended_by_definite(walker, P, out)
    if ended is not None:
        return ended
    sure = [NOT(cond) for _w, _m, cond, definite in out if definite]
    if len(sure) > 1 and walker.solve(AND(P.constraint(), *sure)) is None:
        return out + [(None, {}, False, True)]
    return out  # not every execution of the read: reaching.py's general chain follows them (reaching_tag)


def _latest(walker, y, bar, role, C, W):
    """[(mapping of the copy's loop variables, validity, order or None)] of the latest instance of copy `y` whose
    role had made fewer than (q + 1) C arrivals on the wait's element before it (module doc; in a tile loop's ring
    one entry per tile offset: `_tiled_latest`), or the reason it is not of that form."""
    A = walker.A
    if len(y.point.loops) not in (1, 2):  # (two: a ring loop directly in a tile loop, as the read is: _cross)
        return "the copy is not directly in one loop"
    L = y.point.loops[-1]
    if const_of(L.step) != 1:
        return "the copy's loop does not step by 1"
    if const_of(y.elem) is not None and len(y.point.loops) == 1:
        return _latest_constant(walker, y, bar, role, C, W)
    dy = _offset(y.elem, L.var)
    if dy is None:
        return f"the copy's element of {bar[5:]} is not (k + d) % S"
    xs = [x for x in A.arrives if x.bar == bar]
    if A.__dict__.get("_arrive_ops", {}).get((bar, role)) != len(xs):
        return f"not every arrive op on {bar[5:]} was walked before the read"
    nx = nb = 0
    others = []  # per arrive op on another element than the copy's: its element's distance behind the copy's
    for x in xs:
        if tuple(x.point.loops) != tuple(y.point.loops):
            return f"an arrive on {bar[5:]} is outside the copy's loop"
        if not _holds_before(walker, L, x.point.path, y.point.path, y.point.loops[:-1]):
            return f"an arrive on {bar[5:]} is under a condition that is not prefix-closed or not implied by the copy's"
        dx = _offset(x.elem, L.var)
        if dx is None or dx[1] != dy[1] or (dx != dy and len(y.point.loops) != 1):
            return f"an arrive on {bar[5:]} is on another element than the copy's"
        lin = linear_form(_T(x.point) - _T(y.point))
        if lin is None or set(lin) - {1}:
            return "an arrive's order against the copy is not constant"
        nx += 1
        if (dy[0] - dx[0]) % dy[1]:
            others.append((dy[0] - dx[0]) % dy[1])
        else:
            nb += 1 if lin.get(1, 0) < 0 else 0
    if nx == 0:
        return f"no arrive on {bar[5:]}"
    if others:  # arrive ops on other elements than the copy's (a flat ring only)
        return _latest_mixed(L, W, C, nx, nb, dy, others)
    d, R = dy
    if len(y.point.loops) == 2:
        return _tiled_latest(walker, y, W, C, nx, nb, d, R)
    e, q = W.elem, W.phase
    v0 = L.start + (e - d - L.start) % R
    m = ((q + 1) * C - 1 - nb) // nx
    kp = v0 + m * R
    valid = AND(cmp(">=", m, 0), cmp("<", kp, L.stop), cmp(">=", e, 0), cmp("<", e, R))
    return [({L.var.name: kp}, valid, None)]


def _holds_before(walker, L, g, h, outer=()) -> bool:
    """Does the arrive's guard `g` hold at every iteration of L up to and including any where the copy's guard `h`
    holds? True for no guard; for an upper bound in L's index (`j < n_kv`: prefix-closed, periodic.guard with no
    lower bound and no period) that `h` implies. Then the arrive runs at every iteration before a copy instance,
    and the element count of the module doc is exact. In a tile loop's ring (`outer`) every iteration counts
    (the later ones' arrivals are the next tile's): the guard must hold at each."""
    if g is True:
        return True
    if outer:
        return walker.solve(AND(*(lp.constraint() for lp in outer), L.constraint(), NOT(g))) is None
    gd = periodic.guard(g, L, set())
    if gd is None or gd.lows or gd.period is not None:
        return False
    return walker.solve(AND(L.constraint(), h, NOT(g))) is None


def note_gaps(kir, gaps):
    """The debug line for a kernel whose tag check falls back to the stage copies."""
    log.debug("symbolic rings: %s: tag check on the stage copies (%s)", getattr(kir, "name", "?"), "; ".join(gaps))


def uses_arrays(kir) -> bool:
    return any(isinstance(s, ir.Assign) and isinstance(s.value, ir.Call) and s.value.op == "mbarrier"
               and s.value.attrs.get("stages") is not None for s in ir.walk(kir.body))


def _own_writes(walker, alloc, P, later: bool, so_far: bool = True) -> bool:
    """Does the reading role write `alloc`: before the read (`so_far`: the walk's writes until now), or in the body
    of a loop around it (`later`: known after the loop's first walk)? Then the read sees the newest write in its
    role's program order (a ring the role fills with its own bulk copies: layer_norm_ring, rotary_ring), and
    reaching.py's general chain decides, as on the stage copies."""
    if so_far and any(w.access.alloc is alloc and in_line(w.point.role, P.role) for w in walker.writes):
        return True
    return later and any(w.access.alloc is alloc and in_line(w.point.role, P.role) for L in P.loops for w in L.writes)


# nested ring (V12): a ring loop directly in a persistent tile loop (`for t in range(first, n, step): turn = ((t -
# first) // step) * rounds; for k in range(rounds * S): wait(full[k % S], turn + k // S) ...`), the form
# mbarrier_arrays._flatten writes as one slot loop for the stage copies. Here the producer's arrivals on element e
# before its copy at tile n and round m are counted over the tile loop: n Rp nx (every tile's ring makes Rp nx on
# each element, Rp = its rounds) plus m nx + nb, so the copy a wait for phase q lands is the one at slot
# G = n Rp + m = M (M as in the flat ring). With q = a X Rp + rest (X the reader's tile index, the tile's first
# slot X Rp as the kernel writes it) and C = c nx, M = c a X Rp + c rest + delta: the copy's tile is c a X + dn
# and its round c rest + delta - dn Rp, for the one tile offset dn that puts the round in [0, Rp). Each offset is a
# candidate under that condition (exclusive: no order among them is needed), and the copy's tile t' = start + (c a
# X + dn) step = start + c a (t - start) + dn step is linear (X step = t - start on the loop's iterations).


def _tiled_phase(W):
    """(a, R, rest) where the wait's phase is a X R + rest, X the iteration index of the tile loop around its ring
    loop ((t - start) // step), a >= 1 a constant, R and rest not depending on the tile (R the ring's rounds a tile:
    X R the tile's first slot); or None."""
    Lt, L = (W.point.loops + (None,))[:2]
    X = Lt.index()
    lin = linear_form(W.phase)
    if lin is None:
        return None
    tiles = [(x, c) for x, c in lin.items() if isinstance(x, BinOp) and x.op == "*" and X in (x.a, x.b)]
    if len(tiles) != 1 or tiles[0][1] < 1:
        return None
    atom, a = tiles[0]
    R = atom.b if atom.a == X else atom.a
    rest = build_linear({x: c for x, c in lin.items() if x is not atom})
    tile = {Lt.var.name, Lt.trip.name, *Lt.derived}
    ring = {L.var.name, L.trip.name, *L.derived} if L is not None else set()
    if term_vars(rest) & tile or term_vars(R) & (tile | ring):
        return None
    return a, R, rest


def _tiled_monotone(walker, W) -> bool:
    """The phase of a wait in a tile loop's ring never decreases: within the ring loop (rest(k - 1) <= rest(k)) and
    from a tile's last iteration to the next tile's first (a R + rest(k2) >= rest(k) for any two iterations k, k2
    of the ring loop: the next tile's phase is a (X + 1) R + rest(k2))."""
    got = _tiled_phase(W)
    if got is None:
        return False
    a, R, rest = got
    if len(W.point.loops) == 1:  # a wait directly in the tile loop: a (X + 1) R + rest >= a X R + rest where R >= 0
        return walker.solve(AND(W.point.constraint(), cmp("<", R, 0))) is None
    L = W.point.loops[1]
    k = L.var
    inner = AND(L.constraint(), cmp(">=", k - L.step, L.start), cmp(">", subst(rest, {k.name: k - L.step}), rest))
    if walker.solve(inner) is not None:
        return False
    k2 = Var(k.name + "'")
    across = AND(L.constraint(), subst(L.constraint(), {k.name: k2}), cmp("<", a * R + subst(rest, {k.name: k2}), rest))
    return walker.solve(across) is None


def _same(x, y) -> bool:
    lx, ly = linear_form(x), linear_form(y)
    if lx is None or ly is None:
        return False
    return {a: c for a, c in lx.items() if c} == {a: c for a, c in ly.items() if c}


def _tiled_latest(walker, y, W, C, nx, nb, d, R):
    """_latest for a copy in a ring loop directly in a tile loop (the comment above): one candidate per tile offset
    dn in (0, -1, 1), each (mapping of the tile and ring variables, validity, order 0), or the reason the ring is
    not of that form."""
    Lt, L = y.point.loops
    Lr = W.point.loops[0]
    got = _tiled_phase(W)
    if got is None:
        return "the wait's phase is not the tile's first slot (tile index times the rounds a tile) plus a count in it"
    a, Rw, rest = got
    if C % nx:
        return "the arrivals an iteration do not divide the arrival count (a tile loop's ring)"
    span = linear_form(L.stop - L.start)
    tile = {Lt.var.name, Lt.trip.name, *Lt.derived}
    if span is None or any(c % R for c in span.values()) or term_vars(L.start) & tile or term_vars(L.stop) & tile:
        return "the copy's ring loop does not run the same whole number of turns in every tile"
    Rp = build_linear({x: c // R for x, c in span.items()})
    if not _same(Rp, Rw):
        return "the wait's rounds a tile are not the copy's ring loop's"
    if not (_same(Lt.start, Lr.start) and _same(Lt.step, Lr.step)):
        return "the copy's tile loop does not start and step as the read's"
    c = C // nx
    delta = c + (-1 - nb) // nx
    e = W.elem
    v0 = L.start + (e - d - L.start) % R
    out = []
    for dn in (0, -1, 1):
        m = rest * c + (delta - Rp * dn)
        tp_ = Lt.start + (Lr.var - Lr.start) * (c * a) + Lt.step * dn
        kp = v0 + m * R
        valid = AND(cmp(">=", m, 0), cmp("<", m, Rp), cmp(">=", Lt.step, 1), cmp(">=", tp_, Lt.start),
                    cmp("<", tp_, Lt.stop), cmp("<", kp, L.stop), cmp(">=", e, 0), cmp("<", e, R))
        out.append(({Lt.var.name: tp_, L.var.name: kp}, valid, 0))
    return out


def _reader_waits(walker, bar, P):
    """The wait ops on `bar` in the reading role's line whose execution in the read's iteration, before it, lands
    the copies the read sees (each with its guard: the copies it lands are candidates where it runs), or the reason
    (a str) the read is not of the covered form. One wait op in the line: that wait, in the read's loop. Several
    (the one-stage phase bugs' `if k % S == 1: wait(full[k % S], ...) else: wait(...)`, conv_tma's STAGES waits on
    constant elements in a loop over rounds): every one in the read's loop, directly, with a known phase and
    element, and each one's phase the highest any execution of any of them before the read waited for on its
    element (`_highest_on_element`): the copies of its element visible at the read are then those of phases up to
    its own, as with one monotone wait. Those under a guard the walk folded to False run nowhere: left out."""
    A = walker.A
    waits = [x for x in walker.mwaits if x.bar == bar and in_line(x.point.role, P.role)]  # so far
    n = waits_in_line(A, bar, P.role)
    if n == 0 or not waits:
        return []  # no wait lands a copy before the read (a missing wait): reaching.py's general chain, as on copies
    if n > 1 and len(P.loops) in (1, 2) and _in_tile_ring(walker, bar, P, waits):
        return _tiled_reader_waits(walker, bar, P, waits, n)
    if n == 1 or len(P.loops) != 1:
        if n != 1:
            return f"the reading role does not wait on {bar[5:]} exactly once"
        if len(waits) != 1 or waits[0].phase is None or waits[0].elem is None:
            return f"the wait on {bar[5:]} before the read is not one wait with a known phase and element"
        if tuple(waits[0].point.loops) != tuple(P.loops):
            return f"the wait on {bar[5:]} is not in the read's loop"
        return waits
    L = P.loops[0]
    now = [x for x in waits if tuple(x.point.loops) == tuple(P.loops)]  # this iteration, before the read
    body = None
    if L.mwaits is not None:  # (None: the loop's first walk; the recording walk checks the rest)
        body = [x for x in L.mwaits if x.bar == bar and in_line(x.point.role, P.role)]
        if len(body) != n or any(tuple(x.point.loops) != tuple(P.loops) for x in body):
            return f"a wait on {bar[5:]} in the reading role's line is not directly in the read's loop"
    if any(x.phase is None or x.elem is None for x in now + (body or [])):
        return f"a wait on {bar[5:]} before the read has no known phase or element"
    live = [x for x in now if x.point.path is not False]
    if not live:
        return []  # none in the read's iteration before it: the general chain, as on the copies
    out = []
    for i, W in enumerate(live):
        # where another wait of this iteration before the read waited on W's element for a higher phase (or the
        # same, earlier), that one decides: W's copies are candidates only where it is the highest (the earliest
        # of the highest). Two candidates for one copy would hide each other (reaching.newest_of: strictly newer)
        over = [AND(V.point.path, cmp("==", V.elem, W.elem), cmp(">" if j > i else ">=", V.phase, W.phase))
                for j, V in enumerate(live) if j != i]
        where = AND(W.point.path, *(NOT(o) for o in over))
        if where is False:
            continue
        W = replace(W, point=replace(W.point, path=where)) if where is not W.point.path else W
        if body is not None and not _highest_on_element(walker, W, P, [], body):
            return f"a wait on {bar[5:]} before the read is not for the highest phase its element was waited for"
        out.append(W)
    return out


def _highest_on_element(walker, W, P, now, body) -> bool:
    """No execution before the read P of a wait op on the array in its line (`now`: this iteration's, before P;
    `body`: every one of the loop's body, at an earlier iteration) waits on W's element for a higher phase than W
    where W runs (reaching._highest per element: the waits on other elements complete other phases)."""
    L = P.loops[0]
    step = const_of(L.step)
    if step is None or step <= 0:
        return False
    bad = [AND(x.point.path, cmp("==", x.elem, W.elem), cmp(">", x.phase, W.phase)) for x in now if x is not W]
    for x in body:
        m = x.point.instance("~hi")
        bad.append(AND(subst(x.point.constraint(), m), cmp("<", m[L.var.name], L.var),
                       cmp("==", subst(x.elem, m), W.elem), cmp(">", subst(x.phase, m), W.phase)))
    return walker.solve(AND(P.constraint(), W.point.path, OR(*bad))) is None


def _latest_mixed(L, W, C, nx, nb, dy, others):
    """`_latest` where some of the nx arrive ops are on other elements than the copy's (one arrive a tile on the
    next element, symbolic_ring_kernels' BUG "elem"): the m-th copy on the wait's element e (k = v0 + m R) has
    m nx + nb + `_arrivals_ahead` arrivals on e before it, every op arriving on e once per R iterations. The latest
    with fewer than (q + 1) C is m = ((q + 1) C - 1 - nb - ahead) // nx, but no later than the loop's last copy
    on e: the other elements' ops can complete e's phase after it (their arrivals of the iterations past it)."""
    d, R = dy
    e, q = W.elem, W.phase
    v0 = L.start + (e - d - L.start) % R
    m = ((q + 1) * C - 1 - nb - _arrivals_ahead(e, dy, L.start, others)) // nx
    kp = v0 + periodic._smin(m, (L.stop - 1 - v0) // R) * R
    valid = AND(cmp(">=", m, 0), cmp("<", v0, L.stop), cmp(">=", e, 0), cmp("<", e, R))
    return [({L.var.name: kp}, valid, None)]


def _arrivals_ahead(e, dy, a0, others):
    """The arrivals on element e of the arrive ops on other elements than the copy's (copy on (k + d) % R; an op on
    (k + dx) % R, delta = (d - dx) % R > 0) before the copy's first iteration on e, v0 = a0 + u with
    u = (e - d - a0) % R: such an op arrives on e at the iterations k = e - dx (mod R), and [a0, v0) holds one
    of them iff (u + delta) % R < u, i.e. u + delta >= R: (u + delta) // R (0 or 1). From v0 on, every op
    arrives on e once per R iterations, as the copy's own ones do: the m-th copy on e has m nx + nb + this many
    arrivals on e before it (nb: the ops on the copy's element before it in the body). Linear: mod and div by the
    constant R."""
    d, R = dy
    u = (e - d - a0) % R
    out = 0
    for delta in sorted(set(others)):
        out = out + others.count(delta) * ((u + delta) // R)
    return out


def _latest_constant(walker, y, bar, role, C, W):
    """`_latest` for a copy on a constant element c of the array in a loop over rounds (conv_tma: the stages
    unrolled by `static_range`, `full[s]` in round j): its instance at iteration k has (k - a0) nx + nb arrivals on
    c before it (nx: the arrive ops on c, each once an iteration, nb of them before the copy in the body), so the
    latest issued with fewer than (q + 1) C is at k = a0 + ((q + 1) C - 1 - nb) // nx, where the wait's element is
    c. Every arrive op on the array on a constant element, in the copy's loop; those on c under a guard the copy's
    implies at every earlier iteration (`_holds_before`)."""
    A = walker.A
    L = y.point.loops[0]
    c = const_of(y.elem)
    xs = [x for x in A.arrives if x.bar == bar]
    if A.__dict__.get("_arrive_ops", {}).get((bar, role)) != len(xs):
        return f"not every arrive op on {bar[5:]} was walked before the read"
    nx = nb = 0
    for x in xs:
        if tuple(x.point.loops) != (L,):
            return f"an arrive on {bar[5:]} is outside the copy's loop"
        if const_of(x.elem) is None:
            return f"an arrive on {bar[5:]} is not on a constant element, as the copy is"
        if const_of(x.elem) != c or x.point.path is False:
            continue
        if not _implied_prefix_closed(walker, L, x.point.path, y.point.path):
            return f"an arrive on {bar[5:]} is under a condition that is not prefix-closed or not implied by the copy's"
        lin = linear_form(_T(x.point) - _T(y.point))
        if lin is None or set(lin) - {1}:
            return "an arrive's order against the copy is not constant"
        nx += 1
        nb += 1 if lin.get(1, 0) < 0 else 0
    if nx == 0:
        return f"no arrive on {bar[5:]}[{c}]"
    m = ((W.phase + 1) * C - 1 - nb) // nx
    kp = L.start + m
    return [({L.var.name: kp}, AND(cmp(">=", m, 0), cmp("<", kp, L.stop), cmp("==", W.elem, c)), None)]


def _implied_prefix_closed(walker, L, g, h) -> bool:
    """`_holds_before` for any guard: the copy's guard h implies the arrive's g, and g holding at an iteration of L
    holds at every earlier one (conv_tma's `j * STAGES + s < k_tiles`, an upper bound of j with a coefficient:
    asked of the solver, k' in [start, k) renamed apart). A guard with the loop's per-iteration names is not
    asked (False)."""
    if g is True:
        return True
    if {n for n in term_vars(g)} & set(L.derived):
        return False
    if walker.solve(AND(L.constraint(), h, NOT(g))) is not None:
        return False
    k2 = Var(L.var.name + "~pc")
    earlier = AND(cmp(">=", k2, L.start), cmp("<", k2, L.var), NOT(subst(g, {L.var.name: k2})))
    return walker.solve(AND(L.constraint(), g, earlier)) is None


def _in_tile_ring(walker, bar, P, waits) -> bool:
    """Do the reading role's waits on `bar` sit in a tile loop around a ring loop (P in the tile loop P.loops[0],
    directly or in a ring loop in it, and some wait on `bar` in a ring loop directly in that tile loop)?"""
    Lt = P.loops[0]
    seen = waits + (Lt.mwaits or [])
    return any(len(x.point.loops) == 2 and x.point.loops[0] is Lt for x in seen if x.bar == bar)


def _tiled_reader_waits(walker, bar, P, waits, n):
    """Several waits on the array in the reading role's line, in a tile loop around a ring loop (gemm_persistent
    DEFER=2: the prologue's wait(full[0], turn) for k-tile 0, then the ring's wait(full[k % S], turn + k // S)): the
    one wait op before the read in the read's own loops lands its copies, where no execution of any of the line's
    waits before the read waited for a higher phase on its element. With every wait's phase a X R + rest_x
    (`_tiled_phase`: the same a and R), that is: in an earlier tile, rest_x <= a R + rest (R >= 0); in the read's
    tile, before it (a wait textually before the read, or an earlier iteration of the read's own ring loop),
    rest_x <= rest. The wait's own op is left to `_tiled_monotone`. Or the reason the read is not of this form.
    (The element term must not read the tile index: an earlier tile's is asked at this tile's.)"""
    Lt = P.loops[0]
    now = [x for x in waits if tuple(x.point.loops) == tuple(P.loops) and x.point.path is not False]
    if len(now) != 1 or now[0].phase is None or now[0].elem is None:
        return f"not one wait on {bar[5:]} with a known phase and element before the read in its loops"
    W = now[0]
    got = _tiled_phase(W)
    if got is None:
        return f"the wait's phase on {bar[5:]} is not the tile's first slot plus a count within the tile"
    a, R, rest = got
    body = Lt.mwaits
    if body is None:
        return [W]  # the tile loop's first walk: the recording walk checks the other waits
    body = [x for x in body if x.bar == bar and in_line(x.point.role, P.role)]
    if len(body) != n or any(x.point.loops[0] is not Lt or len(x.point.loops) > 2 for x in body):
        return f"a wait on {bar[5:]} in the reading role's line is not in the read's tile loop or a ring loop in it"
    here = (getattr(P.span, "line", 0), getattr(P.span, "col", 0))
    bad = []
    for x in body:
        gx = _tiled_phase(x) if x.phase is not None and x.elem is not None else None
        if gx is None or gx[0] != a or not _same(gx[1], R):
            return f"a wait on {bar[5:]} in the reading role's line has no phase of the tile's form"
        if term_vars(x.elem) & {Lt.var.name, *Lt.derived}:
            return f"a wait on {bar[5:]} in the reading role's line has an element that depends on the tile"
        if x.point.span == W.point.span:
            continue  # the read's own wait op: _tiled_monotone
        m = {}
        if len(x.point.loops) == 2:
            Lx = x.point.loops[1]
            m = {Lx.var.name: Var(Lx.var.name + "~hi"), Lx.trip.name: Var(Lx.trip.name + "~hi")}
        path = subst(x.point.path, m) if m else x.point.path
        inner = subst(x.point.loops[1].constraint(), m) if m else True
        ex, rx = (subst(v, m) if m else v for v in (x.elem, gx[2]))
        # an earlier tile: its guard left out (it may read the tile index, which is not this tile's there)
        bad.append(AND(inner, cmp("==", ex, W.elem), cmp(">", rx, a * R + rest)))
        at = (getattr(x.point.span, "line", 0), getattr(x.point.span, "col", 0))
        same_ring = len(x.point.loops) == 2 and len(P.loops) == 2 and x.point.loops[1].span == P.loops[1].span
        if at < here or same_ring:  # the read's tile, before it
            order = cmp("<=", m[Lx.var.name], P.loops[1].var) if same_ring else True
            bad.append(AND(path, inner, order, cmp("==", ex, W.elem), cmp(">", rx, rest)))
    if walker.solve(AND(P.constraint(), W.point.path, cmp("<", R, 0))) is not None:
        return f"the rounds a tile of {bar[5:]}'s ring may be negative"
    if bad and walker.solve(AND(P.constraint(), W.point.path, OR(*bad))) is not None:
        return f"a wait on {bar[5:]} before the read is not for the highest phase its element was waited for"
    return [W]
