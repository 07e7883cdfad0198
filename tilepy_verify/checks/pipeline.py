"""Pipeline hazards of async copies (cp.async groups, bulk copies on mbarriers).

An async copy's shared writes land when a wait retires its group; another thread sees them only after a
barrier that follows that wait. For every async copy C and every later access R of the same shared tile
(any thread, any iteration), the query asks for instances with T_C < T_R, the same stage, a common element,
and no wait W between them that retires C's group (``group(C) + n_W + 1 <= commits before W``) with, when
R's thread is not C's, a barrier between W and R. Only the latest executions of each wait before R can be
the one that retires most, so the candidates are W at R's iteration k, k - step and k - 2 step of the
innermost common loop (and the last iteration of loops R is not in): a quantifier-free query.
A stage overwritten in the interval where another thread still reads it is reported by the race check
under this same name.

Bulk copies (`copy_bulk` on an mbarrier) are checked through happens-before (sync.py), in both directions:
for a copy Y and any other access R of the same stage and element (any role, any iteration), Y's data must
have landed and be visible at R (a wait on Y's mbarrier for a phase >= Y's, in R's role, before R), or R
must be over before Y is issued (program order in one role, or an arrive after R that a wait before Y
waits for); two copies into one element are ordered through the phases (directly, or through a role that
waits for the first and arrives on a barrier the second waits for).

A read that no write reaches (reaching.py: uninitialized shared memory) is an error, unless a plain store of
another role wrote the whole stage and happens before the read through an arrive after the store and a wait
for that arrival before the read (the producer that gathers a tile with ordinary stores and then signals
`full[s]`, as stdlib_kernels/conv_igemm.py): `_stored_before`. Whether that store is the one the read sees,
not a later one, is the race check's part (every pair of a store and a read in concurrent roles is ordered
through an arrive -> wait edge, or reported)."""

from __future__ import annotations

import numpy as np

from ..counterexample import block_of, counter, instance, iteration_of, rename, thread_fields
from ..report import Finding
from ..sync import Sync, concurrent, in_line, instances_before, latest_counted, runs_on
from ..vc import AND, NOT, OR, cmp, const_of, subst
from .overlap import cross_thread, same_thread, slot_of


def check(ctx) -> list:
    out = []
    acc = ctx.analysis.accesses
    reads = _by_source([(r, _uninit_query(ctx, r)) for r in acc if r.kind == "read" and r.uninit is not False],
                       lambda r: (r.span, r.alloc.span))  # a finding's lines: the read's, the tile's
    for group in reads:
        if ctx.solver.none_of([q for _, (q, _m) in group]):
            continue
        for r, (q, m) in group:
            f = _uninitialized(ctx, r, q, m)
            if f is not None:
                out.append(f)
                break
    sync = None
    pairs = []
    for c in acc:
        if c.kind != "async" or c.channel == "C:async":
            continue
        sync = sync or Sync(ctx.analysis)
        for r in acc:
            if r.alloc is c.alloc and not (r.kind == "async" and r.channel == "C:async"):
                if _bulk(ctx, sync, c, r, probe=True) is not None:
                    pairs.append(((c, r), None))
    for group in _by_source(pairs, lambda cr: (cr[0].span, cr[1].span)):
        group = [cr for cr, _ in group]
        # first through the edges of the copy's own stage only (an unrolled ring's other stage copies add
        # terms that grow with STAGES): fewer edges order less, so no hazard there is none with all of them
        own = [_bulk(ctx, _stage_sync(ctx, sync, c), c, r) for c, r in group]
        if ctx.solver.none_of([got[0] for got in own if got is not None]):
            continue
        group = [((c, r), got) for c, r in group if (got := _bulk(ctx, sync, c, r)) is not None]
        if ctx.solver.none_of([q for _, (q, _i) in group]):
            continue  # the pair of source ops is ordered in every stage copy of the ring (one query)
        for (c, r), (q, info) in group:
            model = ctx.solver.check(q)
            if model is not None:
                out.append(_bulk_finding(ctx, c, r, model, info))
                break  # one finding per pair of source lines (the report keeps one)
    for c in acc:
        if c.kind != "async" or c.channel != "C:async":
            continue
        for r in acc:
            if r is c or r.alloc is not c.alloc:
                continue
            for relation in ("same", "cross"):
                rel = same_thread(c, r) if relation == "same" else cross_thread(c, r)
                if rel is None:
                    continue
                f = _query(ctx, c, r, relation, rel)
                if f is not None:
                    out.append(f)
                    break
    return out


def _query(ctx, c, r, relation, rel):
    mc, cc = instance(c.point, "@1")
    mr, cr = instance(r.point, "@2")
    if not c.point.loops and not r.point.loops and not _before_static(c, r):
        return None
    conflict = AND(cc, cr, cmp("<", counter(c.point, "T", mc), counter(r.point, "T", mr)),
                   cmp("==", rename(c.stage, mc), rename(r.stage, mr)))
    if conflict is False:
        return None
    group = rename(c.group, mc)
    ok = []
    thr_c = rel[1] if relation == "cross" else rel[1]
    thr_r = rel[2] if relation == "cross" else rel[1]
    for w in ctx.analysis.waits:
        if w.channel != c.channel:
            continue
        bulk = c.channel != "C:async"
        if w.point.threads is not None and not bulk and thr_c not in set(w.point.threads.tolist()):
            continue
        for m, valid in instances_before(w.point, r.point, mr, depth=3):
            cw = counter(w.point, c.channel, m)
            tw = counter(w.point, "T", m)
            retire = cmp("<=", group + w.n + 1, cw)
            seen_directly = relation == "same" or (bulk and (w.point.threads is None or thr_r in set(
                w.point.threads.tolist())))
            vis = True if seen_directly else cmp("<", counter(w.point, "B", m), counter(r.point, "B", mr))
            ok.append(AND(valid, subst(w.point.path, m), cmp("<", counter(c.point, "T", mc), tw),
                          cmp("<=", tw, counter(r.point, "T", mr)), retire, vis))
    model = ctx.solver.check(AND(conflict, NOT(OR(*ok))))
    if model is None:
        return None
    ws = ctx.analysis.target.warp_size
    off = rel[0]
    vc, cc_ = slot_of(c, off, thr_c)
    vr, cr_ = slot_of(r, off, thr_r)
    stage = ctx.eval(rename(c.stage, mc), model)
    what = "reads" if r.kind == "read" else "writes"
    cex = {"block": block_of(model), **thread_fields(thr_r, ws), "value": vr, "coords": cr_,
           "iteration": iteration_of(r.point, model, "@2"), "stage": stage,
           "address": (stage * c.alloc.stage_elems + off) * c.eb,
           "other_thread": thr_c, "other_value": vc, "other_coords": cc_,
           "other_iteration": iteration_of(c.point, model, "@1"),
           "detail": (f"the async copy issued at iteration {iteration_of(c.point, model, '@1') or '(before loops)'} "
                      f"by thread {thr_c} has not been " + ("retired by a wait_async" if relation == "same" else
                                                           "retired by a wait and made visible by a barrier")
                      + f" when thread {thr_r} {what} stage {stage}")}
    verb = "read" if r.kind == "read" else "written"
    msg = (f"pipeline hazard on shared tile '{ctx.name_of(c.alloc)}': stage {stage} is {verb} "
           f"while an async copy into it may still be in flight")
    return Finding("pipeline_hazard", "error", msg, r.span, cex, c.span)


def _by_source(items, key):
    """`items` ((op or pair of ops, query) in program order) grouped by the source lines of their ops, in
    order of first appearance: the stage copies of one op of an mbarrier ring share its lines."""
    groups: dict = {}
    for it in items:
        groups.setdefault(key(it[0]), []).append(it)
    return list(groups.values())


def _uninit_query(ctx, r):
    m, c = instance(r.point, "@1")
    return AND(c, rename(r.uninit, m), NOT(_stored_before(ctx, r, m))), m


def _uninitialized(ctx, r, query, m):
    model = ctx.solver.check(query)
    if model is None:
        return None
    stage = ctx.eval(rename(r.stage, m), model)
    ws = ctx.analysis.target.warp_size
    coords = tuple(int(model.get(f"uc{d}#{r.id}", x[0])) for d, x in enumerate(r.coords))
    hit = np.nonzero(np.all([c == v for c, v in zip(r.coords, coords)], axis=0))[0] if r.coords else []
    i = int(hit[0]) if len(hit) else 0
    cex = {"block": block_of(model), **thread_fields(int(r.thr[i]), ws), "value": int(r.val[i]),
           "coords": coords, "iteration": iteration_of(r.point, model, "@1"),
           "stage": stage, "detail": f"no copy or store has written stage {stage} of '{ctx.name_of(r.alloc)}' "
                                     "before this read"}
    return Finding("pipeline_hazard", "error",
                   f"pipeline hazard on shared tile '{ctx.name_of(r.alloc)}': stage {stage} is read before anything "
                   "was written to it", r.span, cex, r.alloc.span)


def _stored_before(ctx, r, mr):
    """Bool term: a plain store of another, concurrently running role wrote the whole stage `r` reads, and
    happens before r's instance (renamed by mr): the store, then (program order, same iteration) an arrive
    X on an mbarrier that only the storing role arrives on, which a wait in r's line before r waits for
    (sync.py). Only the latest instance of X that the wait counts is tried (its iteration is the store's), so
    the query stays quantifier-free; a store with no such arrive after it, or an arrive on a barrier or for a
    phase r's role does not wait for, gives nothing, and the read is still reported."""
    sync = ctx.__dict__.setdefault("_sync", Sync(ctx.analysis))
    terms = []
    for w in ctx.analysis.accesses:
        if (w.alloc is not r.alloc or w.kind != "write" or w.partial or w.window
                or not concurrent(w.point, r.point) or _other_stage(w.stage, r.stage)):
            continue
        for x in sync.arrives:
            if (not sync.exact_arrive(x) or not in_line(x.point.role, w.point.role)
                    or tuple(x.point.loops) != tuple(w.point.loops) or not runs_on(x.point, w.point)):
                continue
            gap = const_of(counter(x.point, "T", {}) - counter(w.point, "T", {}))
            if gap is not None and gap <= 0:
                continue  # the arrive is not after the store
            C = sync.count(x.bar)
            for wt, mwt, wc in sync.waits_before(x.bar, r.point, mr):
                got = latest_counted(x.point, x.index, x.key, (rename(wt.phase, mwt) + 1) * C)
                if got is None:
                    continue
                mx, vx = got
                terms.append(AND(wc, vx, rename(x.point.path, mx), rename(x.valid, mx), rename(w.point.path, mx),
                                 cmp("<", counter(w.point, "T", mx), counter(x.point, "T", mx)),
                                 cmp("==", rename(w.stage, mx), rename(r.stage, mr))))
    return OR(*terms)


def _other_stage(a, b) -> bool:
    """Two stage terms that are different constants."""
    ca, cb = const_of(a), const_of(b)
    return ca is not None and cb is not None and ca != cb


def _before_static(c, r) -> bool:
    tc, tr = c.point.counters.get("T", 0), r.point.counters.get("T", 0)
    try:
        return int(tc) < int(tr)
    except TypeError:
        return True


def _stage_sync(ctx, sync, c):
    """`sync` with only the arrives on mbarriers that are no array element or the element of c's stage (an
    unrolled ring's `full[s]` / `empty[s]` for the copy's constant stage s), cached per stage."""
    s = const_of(c.stage)
    if s is None:
        return sync
    cache = sync.__dict__.setdefault("_by_stage", {})
    got = cache.get(s)
    if got is None:
        got = cache[s] = Sync(ctx.analysis, shares=sync.shares)
        got.arrives = [x for x in sync.arrives if _element(x.bar) in (None, s)]
    return got


def _element(bar):
    """The index of an mbarrier array element's name ('mbar:full[2]' -> 2), None for a plain mbarrier."""
    if not bar or not bar.endswith("]") or "[" not in bar:
        return None
    try:
        return int(bar[bar.rindex("[") + 1:-1])
    except ValueError:
        return None


def _bulk(ctx, sync, c, r, probe=False):
    """A bulk copy c and another access r of one element: ordered by happens-before (module doc)? (the query
    whose models are the unordered instances, and what `_bulk_finding` needs), or None. probe: only whether
    there is a query (True), without building it."""
    if _other_stage(c.stage, r.stage):
        return None  # two stage copies of a ring (constant stages): no common element
    rel = cross_thread(c, r)
    if rel is None:
        same = same_thread(c, r)
        if same is None:
            return None
        rel = (same[0], same[1], same[1])
    off, thr_c, thr_r = rel
    if r is c:
        thr_r = thr_c
    mc, cc = instance(c.point, "@1")
    mr, cr = instance(r.point, "@2")
    same_stage = cmp("==", rename(c.stage, mc), rename(r.stage, mr))
    if same_stage is False:
        return None
    base = AND(cc, cr, same_stage)
    if probe:
        return None if base is False else True
    line = in_line(c.point.role, r.point.role)
    tc, tr = counter(c.point, "T", mc), counter(r.point, "T", mr)
    if r.kind == "async":  # two copies into one element: the later one must be issued after the first landed
        if line:
            base = AND(base, cmp("<", tc, tr))
            ok = OR(sync.landed(c, mc, r.point, mr), sync.landed_two_hops(c, mc, r.point, mr))
        else:
            ok = OR(sync.landed(c, mc, r.point, mr), sync.landed_two_hops(c, mc, r.point, mr),
                    sync.landed(r, mr, c.point, mc), sync.landed_two_hops(r, mr, c.point, mc))
    else:
        # r is over before the copy is issued: program order orders one thread's own ops only; another
        # thread's access needs a block barrier between the two, or an arrive -> wait edge
        barrier_between = cmp("<", counter(r.point, "B", mr), counter(c.point, "B", mc))
        before = OR(barrier_between, sync.sync(r.point, mr, c.point, mc, thr_r, thr_c))
        if line and thr_r == thr_c:
            before = OR(cmp("<", tr, tc), before)
        ok = OR(sync.landed(c, mc, r.point, mr, thr_r), before)
    if base is False:
        return None
    return AND(base, NOT(ok)), (off, thr_c, thr_r, mc, mr)


def _bulk_finding(ctx, c, r, model, info):
    off, thr_c, thr_r, mc, mr = info
    ws = ctx.analysis.target.warp_size
    vc_, cc_ = slot_of(c, off, thr_c)
    vr, cr_ = slot_of(r, off, thr_r)
    stage = ctx.eval(rename(c.stage, mc), model)
    C = ctx.analysis.mbarriers.get(c.bar)
    try:
        phase = ctx.eval(rename(c.arr, mc), model) // C if C and c.arr is not None else None
    except Exception:  # noqa: BLE001 - an unknown counter: no phase to name
        phase = None
    bar = (c.bar or "?").removeprefix("mbar:")
    it_c, it_r = iteration_of(c.point, model, "@1"), iteration_of(r.point, model, "@2")
    what = {"read": "reads", "write": "writes", "async": "bulk-copies into"}[r.kind]
    cex = {"block": block_of(model), **thread_fields(thr_r, ws), "value": vr, "coords": cr_,
           "iteration": it_r, "stage": stage, "address": (stage * c.alloc.stage_elems + off) * c.eb,
           "other_thread": thr_c, "other_value": vc_, "other_coords": cc_, "other_iteration": it_c,
           "phase": phase, "roles": (_role_name(ctx, r), _role_name(ctx, c)),
           "detail": (f"thread {thr_r} {what} stage {stage} at iteration {it_r or '(before loops)'}; the bulk copy "
                      f"issued by thread {thr_c} at iteration {it_c or '(before loops)'} (phase {phase} of "
                      f"'{bar}') is neither waited for before it nor issued after it is done")}
    verb = {"read": "read", "write": "written", "async": "bulk-copied into"}[r.kind]
    msg = (f"pipeline hazard on shared tile '{ctx.name_of(c.alloc)}': stage {stage} is {verb} while a bulk copy "
           f"into it on mbarrier '{bar}' is not ordered with it (no mbarrier wait for the copy's phase before "
           "the access, and no arrive/wait pair that makes the copy wait for the access)")
    return Finding("pipeline_hazard", "error", msg, r.span, cex, c.span)


def _role_name(ctx, a) -> str:
    t = a.point.threads
    if t is None or not len(t):
        return "all threads"
    return f"threads {int(t.min())}..{int(t.max())}"
