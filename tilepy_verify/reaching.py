"""Which write a shared-memory read sees: the most recent write to the same stage, as tag alternatives.

The candidates, most recent first: writes earlier in this iteration of the innermost loop; the loop body's
writes at iterations k - step, k - 2 step, ... (a window of `stages + 1` iterations, enough for a ring of
stages written once per iteration; anything older gives an "unknown" alternative); then the same one level
out, down to the top level. A candidate is "definite" when it writes the whole stage unconditionally; the
alternative of an older candidate requires every newer definite candidate not to match (different stage or
iteration out of range), so the alternatives are exclusive and, together with the final "unknown" one,
exhaustive. The pipeline check proves separately that the most recent write has landed and is visible.
"""

from __future__ import annotations

from tilepy.symbolic import Var

from .tagterms import TOP, Alt
from .vc import AND, NOT, cmp, subst


def _subst_tag(t, m):
    from tilepy.symbolic import Sym

    if isinstance(t, Sym):
        return subst(t, m)
    if isinstance(t, tuple):
        return tuple(_subst_tag(x, m) for x in t)
    return t


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
                out.append((w, {}, w.point.path, not w.access.partial))
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
                definite = not w.access.partial and len(wl) == level
                for lp in wl[level:]:
                    k, t = Var(f"{lp.var.name}~d{d}"), Var(f"{lp.trip.name}~d{d}")
                    m[lp.var.name], m[lp.trip.name] = k, t
                    conds.append(subst(lp.constraint(), m))
                out.append((w, m, AND(subst(w.point.path, m), *conds), definite))
        beyond = cmp(">=", L.var - (window + 1) * L.step, L.start)
        out.append((None, {}, beyond, True))
    return out


def reaching_tag(walker, ref, acc):
    """callable(coords) -> [Alt] for a read `acc` of `ref` (see module doc)."""
    chain = candidates(walker, ref.alloc, acc.point)
    stage = ref.stage if ref.stage is not None else 0
    span = acc.span
    # when no write reaches the read at all (uninitialized shared memory): a pipeline hazard of its own
    not_before = []
    for w, m, cond, definite in chain:
        match = cond if w is None else AND(cond, cmp("==", subst(w.access.stage, m) if m else w.access.stage, stage))
        if definite:
            not_before.append(NOT(match))
    acc.uninit = AND(*not_before)

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
                if match is not False:
                    for a in w.tag(coords):
                        c = AND(match, *not_before, subst(a.cond, m) if m else a.cond)
                        if c is not False:
                            alts.append(Alt(c, _subst_tag(a.tag, m) if m else a.tag, a.src or w.access.span))
            if definite:
                not_before.append(NOT(match))
        # nothing wrote the stage: uninitialized shared memory
        alts.append(Alt(AND(*not_before), TOP, span))
        return [a for a in alts if a.cond is not False]

    return tag
