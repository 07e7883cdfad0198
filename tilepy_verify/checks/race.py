"""Shared-memory data races: two distinct threads touch one address in one barrier interval and at least
one of them writes. Intervals are compared through the symbolic barrier counter (``B1 == B2``) of two
instances of the ops, each with its own iteration variables, so races between iteration k and any other
iteration are covered. Where one side is an async copy, the finding is a pipeline hazard (a stage
overwritten while another thread may still read it)."""

from __future__ import annotations

from tilepy.symbolic import Var

from ..counterexample import block_of, counter, instance, iteration_of, rename, thread_fields
from ..report import Finding
from ..sync import Sync, concurrent, in_line, instances_after, runs_on
from ..vc import AND, NOT, OR, SolverUnknown, cmp
from .overlap import cross_thread, self_conflict, slot_of


def pairs(accesses):
    by_alloc: dict = {}
    for a in accesses:
        by_alloc.setdefault(a.alloc.id, []).append(a)
    for lst in by_alloc.values():
        for i, a in enumerate(lst):
            for b in lst[i:]:
                yield a, b


def check(ctx) -> list:
    out = []
    todo = [(a, b) for a, b in pairs(ctx.analysis.accesses) if not (a.kind == "read" and b.kind == "read")]
    # the pairs of a bulk store's read and a write asked together first: their disjunction has a model exactly
    # when one of them does (one query; gemm_persistent DEFER=2's 12 pairs 0.8-1.05 s CPU one by one, 0.3-0.5 s
    # together); one by one (as below) only where it has one, for the finding
    stores = [(a, b, q) for a, b in todo if (q := _pair(ctx, a, b, probe=True)) is not None]
    if len(stores) > 1 and _none_of(ctx, [q for _a, _b, q in stores]):
        done = {(id(a), id(b)) for a, b, _q in stores}
        todo = [(a, b) for a, b in todo if (id(a), id(b)) not in done]
    for a, b in todo:
        f = _pair(ctx, a, b)
        if f is not None:
            out.append(f)
    return out


def _none_of(ctx, terms) -> bool:
    """solver.none_of(terms); False (ask them one by one) where the solver does not settle the disjunction."""
    try:
        return ctx.solver.none_of(terms)
    except SolverUnknown:
        return False


def _bulk(a) -> bool:
    return a.kind == "async" and a.channel != "C:async"


def _pair(ctx, a, b, probe=False):
    """A finding for the pair, or None; probe: the first query of a bulk store's read and a write (None for any
    other pair, or where there is no query)."""
    if _bulk(a) or _bulk(b):
        return None  # bulk copies: ordered through mbarriers, checked by the pipeline check
    if b.bulk_store and not a.bulk_store:
        a, b = b, a
    if probe and (not a.bulk_store or b.kind == "read" or b.bulk_store):
        return None
    rel = cross_thread(a, b)
    if rel is None:
        return None
    _, ta, tb = rel
    m1, c1 = instance(a.point, "@1")
    m2, c2 = instance(b.point, "@2")
    if a.bulk_store:
        return _bulk_store_pair(ctx, a, b, rel, m1, c1, m2, c2, probe)
    cond = AND(c1, c2, cmp("==", counter(a.point, "B", m1), counter(b.point, "B", m2)),
               cmp("==", rename(a.stage, m1), rename(b.stage, m2)))
    # Concurrent roles are ordered only through mbarriers; the threads of one role also through an mbarrier the
    # role arrives on and then waits for (each thread's arrival releases its own writes, the wait completes
    # after every thread's: a barrier over the role, e.g. consumers writing a shared tile that wgmma reads next).
    if concurrent(a.point, b.point) or ctx.analysis.arrives:
        sync = ctx.__dict__.setdefault("_sync", Sync(ctx.analysis))
        cond = AND(cond, NOT(sync.sync(a.point, m1, b.point, m2, ta, tb)),
                   NOT(sync.sync(b.point, m2, a.point, m1, tb, ta)))
    if a is b:
        distinct = OR(*(cmp("!=", Var(lp.var.name + "@1"), Var(lp.var.name + "@2")) for lp in a.point.loops))
        if a.kind != "read" and self_conflict(a) is not None:
            distinct = True
        cond = AND(cond, distinct)
    model = ctx.solver.check(cond)
    if model is None:
        return None
    off, ta, tb = rel
    if a is b and a.kind != "read" and self_conflict(a) is not None and not a.point.loops:
        off, ta, tb = self_conflict(a)
    # report at the later op (where the missing barrier would go before), the earlier one as the other op
    return report(ctx, b, a, off, tb, ta, model, m2, "@2", "@1")


def _bulk_store_pair(ctx, a, b, rel, m1, c1, m2, c2, probe=False):
    """`a`, a tp.store_bulk's read of its source, lasts from its issue until a store_bulk_wait executed by the
    issuing thread after it (cp.async.bulk.wait_group.read 0 waits for all of that thread's bulk stores, whichever
    tile they read). Another thread's write `b` is ordered with it only when it comes before the issue or after
    such a wait: through program order and barriers in one line of roles (barrier counters), through mbarriers
    across concurrent roles. A barrier alone between issue and write does not order them (the bulk store goes
    on reading)."""
    if b.kind == "read" or b.bulk_store:
        return None
    off, ta, tb = rel
    cond = AND(c1, c2, cmp("==", rename(a.stage, m1), rename(b.stage, m2)))
    B_b = counter(b.point, "B", m2)
    if concurrent(a.point, b.point):
        sync = ctx.__dict__.setdefault("_sync", Sync(ctx.analysis))
        cond = AND(cond, NOT(sync.sync(b.point, m2, a.point, m1, tb, ta)))
    else:
        cond = AND(cond, NOT(cmp("<", B_b, counter(a.point, "B", m1))))
    # the waits' instances in this iteration first (the usual form: the wait after the store), then up to two
    # iterations later too: a model of the first query is asked again with more ways for the read to end
    if probe:
        q = AND(cond, NOT(_waited(ctx, a, m1, b, m2, ta, tb, 1)))
        return None if q is False else q
    for depth in (1, 3):
        model = ctx.solver.check(AND(cond, NOT(_waited(ctx, a, m1, b, m2, ta, tb, depth))))
        if model is None:
            return None
    f = report(ctx, b, a, off, tb, ta, model, m2, "@2", "@1")
    f.message += (" (a tp.store_bulk reads the tile until the issuing thread's next tp.store_bulk_wait: write it "
                  "only after that wait, behind a tp.barrier() or an mbarrier arrived on after the wait)")
    return f


def _waited(ctx, a, m1, b, m2, ta, tb, depth=3):
    """Bool term: a store_bulk_wait executed by a's issuing thread `ta` after a's instance (renamed by m1) comes
    before b's instance (renamed by m2): a barrier after the wait and before b in one line of roles, an
    mbarrier edge from the wait to b across concurrent roles. The wait's instances tried are the earliest after
    the issue (sync.instances_after: this and the next depth - 1 iterations of the innermost common loop, the first
    of the wait's own loops), each with its path condition: a wait that does not run ends nothing."""
    terms = []
    t1 = counter(a.point, "T", m1)
    for w in ctx.analysis.bulk_waits:
        if not in_line(w.role, a.point.role) or not runs_on(w, a.point, ta):
            continue
        for mw, vw in instances_after(w, a.point, m1, depth=depth):
            c = AND(vw, rename(w.path, mw), cmp("<", t1, counter(w, "T", mw)))
            if c is False:
                continue   # (a wait before the store in the same iteration)
            if concurrent(w, b.point):
                # the same edge term for every store the wait ends (a tile's stores: one per shared piece)
                memo = ctx.__dict__.setdefault("_bulk_edges", {})
                key = (id(w), id(b.point), tuple(sorted((k, repr(v)) for k, v in mw.items())),
                       tuple(sorted((k, repr(v)) for k, v in m2.items())), int(ta), int(tb))
                if key not in memo:
                    sync = ctx.__dict__.setdefault("_sync", Sync(ctx.analysis))
                    memo[key] = sync.sync(w, mw, b.point, m2, ta, tb)
                terms.append(AND(c, memo[key]))
            else:
                terms.append(AND(c, cmp("<", counter(w, "B", mw), counter(b.point, "B", m2))))
    return OR(*terms)


def report(ctx, a, b, off, ta, tb, model, m1, s1="@1", s2="@2"):
    ws = ctx.analysis.target.warp_size
    va, ca = slot_of(a, off, ta)
    vb, cb = slot_of(b, off, tb)
    stage = ctx.eval(rename(a.stage, m1), model)
    cex = {"block": block_of(model), **thread_fields(ta, ws), "value": va, "coords": ca,
           "iteration": iteration_of(a.point, model, s1), "stage": stage,
           "address": (stage * a.alloc.stage_elems + off) * a.eb,
           "other_thread": tb, "other_value": vb, "other_coords": cb,
           "other_iteration": iteration_of(b.point, model, s2)}
    kinds = {a.kind, b.kind}
    hazard = "async" in kinds
    what = {"read": "reads", "write": "writes", "async": "async-copies into"}
    msg = (f"{'pipeline hazard' if hazard else 'data race'} on shared tile '{ctx.name_of(a.alloc)}': thread {ta} "
           f"{what[a.kind]} an element that thread {tb} {what[b.kind]} in the same barrier interval")
    if hazard:
        msg += " (the stage is overwritten while it may still be read: add a barrier between them)"
    else:
        msg += " (add tp.barrier() between them)"
    return Finding("pipeline_hazard" if hazard else "race", "error", msg, a.span, cex, b.span)
