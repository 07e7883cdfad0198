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
  reaching._tag_of), and the chain ends there when that copy exists for every execution of the read.

Where a read of such a ring is not of this form (a several-role array, an arrive under a condition or outside
the copy's loop, a cluster's remote arrive or multicast copy, the producer walked after the reader, the copies
not covering every execution of the read, ...), the walk records the reason (`Analysis.symbolic_gaps`) and the
tag check runs on the stage copies as before (tilepy_verify/__init__.py, a debug line naming the reason). The
race, deadlock and pipeline_hazard checks still run on the copies (their element matching is not done here).
"""

from __future__ import annotations

import logging
import os

from tilepy import ir

from . import periodic
from .reaching import _monotone, _tag_of, ended_by_definite, newest_of
from .sync import in_line, sole_role, waits_in_line
from .vc import AND, NOT, cmp, const_of, linear_form, subst

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


def static_gap(kir):
    """Why no ring of `kir` can be of the covered form, seen in the IR before any walk (the walk naming elements
    by term is then not made: the plain one serves the checks that run as written), or None."""
    for s in ir.walk(kir.body):
        if not isinstance(s, ir.Eval) or s.call.op not in ("copy_bulk", "mbarrier_arrive"):
            continue
        c = s.call
        bar = c.args[2] if c.op == "copy_bulk" and len(c.args) > 2 else c.args[0] if c.args else None
        if not (isinstance(bar, ir.Call) and bar.op == "mbarrier_at"):
            continue
        if (c.op == "copy_bulk" and c.attrs.get("multicast")) or (c.op == "mbarrier_arrive" and len(c.args) > 1):
            return f"line {getattr(s.span, 'line', '?')}: a cluster's multicast copy or remote arrive on an array"
    return None


def reaching_tag(walker, ref, acc):
    """callable(coords) -> [Alt] for a read of a ring tile (see the module doc), or None where the read is not a
    ring's (reaching.reaching_tag decides) or not of the covered form (the reason recorded as a gap; reaching.py
    then decides, and the tag check does not use this walk)."""
    ring = ref.alloc.name in walker.ring_allocs or any(
        w.access.alloc is ref.alloc and w.access.kind == "async" and w.access.bar is not None and w.access.arr is None
        for w in walker.writes)  # (a copy on an array's element so far: the tile under another name)
    if not ring or (walker.recording and walker.A.symbolic_gaps):
        return None  # not a ring's tile, or the tag check falls back already
    stage = ref.stage if ref.stage is not None else 0
    got = _cross(walker, ref.alloc, acc.point, stage)
    if isinstance(got, str):
        if walker.recording:
            span = acc.span
            walker.A.symbolic_gaps.append(f"line {getattr(span, 'line', '?')}: {got}")
        return None
    if walker.recording:
        if any(w.access.alloc is ref.alloc and in_line(w.point.role, acc.point.role)
               for L in acc.point.loops for w in L.writes):
            walker.A.symbolic_gaps.append(f"line {getattr(acc.span, 'line', '?')}: the reading role writes the "
                                          "ring's tile in the loop too")
            return None
        return _tag_of(got, acc, stage)
    memo = []

    def tag(coords):  # first walk of a loop: asked once the walk is done
        if not memo:
            memo.append(_tag_of(got, acc, stage))
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
    if len(P.loops) != 1:
        return "the read is not directly in one loop"
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
        if waits_in_line(A, bar, P.role) != 1:
            return f"the reading role does not wait on {bar[5:]} exactly once"
        waits = [x for x in walker.mwaits if x.bar == bar and in_line(x.point.role, P.role)]
        if len(waits) != 1 or waits[0].phase is None or waits[0].elem is None:
            return f"the wait on {bar[5:]} before the read is not one wait with a known phase and element"
        W = waits[0]
        if tuple(W.point.loops) != tuple(P.loops):
            return f"the wait on {bar[5:]} is not in the read's loop"
        ring.append((w, y, bar, C, role, W))
    found, asked = [], set()
    for w, y, bar, C, role, W in ring:
        if id(W) not in asked:  # (the copies of one mbarrier share its wait: asked once)
            asked.add(id(W))
            earlier = cmp("<=", _T(P), _T(W.point))
            if walker.solve(AND(P.constraint(), earlier)) is not None or not _monotone(walker, W):
                return f"the wait on {bar[5:]} is not before the read in every iteration, or its phase decreases"
        got = _latest(walker, y, bar, role, C, W)
        if isinstance(got, str):
            return got
        m, valid = got
        wstage = subst(y.stage, m)
        cond = AND(W.point.path, valid, subst(y.point.path, m), cmp("==", wstage, stage))
        found.append((w, m, cond, _T(y.point, m)))
    out = newest_of(found)
    # the definite candidates that match, together, wherever the read runs hide everything older (several copy ops
    # under complementary guards: each the newest where it matches)
    ended = ended_by_definite(walker, P, out)
    if ended is not None:
        return ended
    sure = [NOT(cond) for _w, _m, cond, definite in out if definite]
    if len(sure) > 1 and walker.solve(AND(P.constraint(), *sure)) is None:
        return out + [(None, {}, False, True)]
    return "the landed copies do not cover every execution of the read"


def _latest(walker, y, bar, role, C, W):
    """(mapping of the copy's loop variable, validity) of the latest instance of copy `y` whose role had made fewer
    than (q + 1) C arrivals on the wait's element before it (module doc), or the reason it is not of that form."""
    A = walker.A
    if len(y.point.loops) != 1:
        return "the copy is not directly in one loop"
    L = y.point.loops[0]
    if const_of(L.step) != 1:
        return "the copy's loop does not step by 1"
    dy = _offset(y.elem, L.var)
    if dy is None:
        return f"the copy's element of {bar[5:]} is not (k + d) % S"
    xs = [x for x in A.arrives if x.bar == bar]
    if A.__dict__.get("_arrive_ops", {}).get((bar, role)) != len(xs):
        return f"not every arrive op on {bar[5:]} was walked before the read"
    nx = nb = 0
    for x in xs:
        if tuple(x.point.loops) != (L,):
            return f"an arrive on {bar[5:]} is outside the copy's loop"
        if not _holds_before(walker, L, x.point.path, y.point.path):
            return f"an arrive on {bar[5:]} is under a condition that is not prefix-closed or not implied by the copy's"
        if _offset(x.elem, L.var) != dy:
            return f"an arrive on {bar[5:]} is on another element than the copy's"
        lin = linear_form(_T(x.point) - _T(y.point))
        if lin is None or set(lin) - {1}:
            return "an arrive's order against the copy is not constant"
        nx += 1
        nb += 1 if lin.get(1, 0) < 0 else 0
    if nx == 0:
        return f"no arrive on {bar[5:]}"
    d, R = dy
    e, q = W.elem, W.phase
    v0 = L.start + (e - d - L.start) % R
    m = ((q + 1) * C - 1 - nb) // nx
    kp = v0 + m * R
    valid = AND(cmp(">=", m, 0), cmp("<", kp, L.stop), cmp(">=", e, 0), cmp("<", e, R))
    return {L.var.name: kp}, valid


def _holds_before(walker, L, g, h) -> bool:
    """Does the arrive's guard `g` hold at every iteration of L up to and including any where the copy's guard `h`
    holds? True for no guard; for an upper bound in L's index (`j < n_kv`: prefix-closed, periodic.guard with no
    lower bound and no period) that `h` implies. Then the arrive runs at every iteration before a copy instance,
    and the element count of the module doc is exact."""
    if g is True:
        return True
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
