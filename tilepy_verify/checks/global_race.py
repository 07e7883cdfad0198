"""Global-memory races. Blocks run in any order and at the same time, so two blocks that touch one element of
a global tensor, at least one of them writing it without an atomic, race: the result depends on the
schedule. One SMT query per pair of global accesses (stores, loads, atomics through windows and gathers)
asks for two blocks, two loop iterations and two tile elements with equal tensor indices, both inside the
tensor and not masked off. A second query per non-atomic scatter asks for two elements of one store, in one
block and iteration, that land on one address (a scatter with duplicate indices).

Stores, atomics and copies into global memory are the writes; loads and copies out of it the reads. What is
not covered: ordering inside a block between different ops (global memory made visible by barriers). An
index the analysis cannot compute (a loaded index tile, an unmodelled mask) may be anything: sound, possibly a
false alarm.
"""

from __future__ import annotations

from tilepy.symbolic import BinOp, Var

from ..counterexample import dims_of, iteration_of
from ..report import Finding
from ..undecided import _undecided
from ..vc import AND, NOT, OR, SolverUnknown, cmp, subst
from .instances import _block_ranges, _divisions, _ids, _instance, _persistent_axis, clear_instances, grid_axes  # noqa: F401
from .tickets import check_linear_first, none_linear
from .tickets import protocol_facts as _protocol_facts

GROUP = 4  # pairs per disjunction (gemm_streamk's global_race: 4.7 s CPU asking whole groups, 3.6 s by fours)


def check(ctx) -> list:
    clear_instances()
    out = []
    accs = ctx.analysis.global_accesses
    groups: dict = {}
    for i, a in enumerate(accs):
        if a.kind == "write":
            f = _duplicates(ctx, a)
            if f is not None:
                out.append(f)
        for b in accs[i:]:
            if a.param != b.param or "write" not in (a.kind, b.kind):
                continue  # atomics combine; reads alone cannot race
            q = _query(ctx, a, b)
            if q is not None:
                key = tuple(sorted(((a.kind, _where(a.span)), (b.kind, _where(b.span))), key=repr))
                groups.setdefault((a.param, key), []).append(q)
    # the pairs of one pair of source ops (their copies in an unrolled ring or static_range) are asked GROUP at
    # a time first, their disjunction's linear abstraction (tickets.linear_abstraction): unsatisfiable, none
    # of them races; otherwise each is asked on its own
    unknown = None
    for qs in groups.values():
        conds = [q[2] for q in qs]
        if len(qs) > 1 and all(none_linear(ctx, conds[i:i + GROUP]) for i in range(0, len(conds), GROUP)):
            continue
        for q in qs:
            try:
                f = _report(ctx, *q)
            except SolverUnknown as e:  # not proven: the other pairs are still asked (their races reported)
                unknown = unknown or e
                continue
            if f is not None:
                out.append(f)
    if unknown is not None:
        if not out:
            raise unknown
        out.append(_undecided(ctx.analysis.kir, "global_race", unknown))
    return out


def _pair(ctx, a, b):
    q = _query(ctx, a, b)
    return None if q is None else _report(ctx, *q)


def _query(ctx, a, b):
    """(a, b, cond, m1, m2, i1): the race query of accesses a and b, or None where they never meet."""
    m1, c1, x1, i1 = _instance(a, "@1", True)
    m2, c2, x2, i2 = _instance(b, "@2", True)
    other_block = OR(*(cmp("!=", Var(f"block{k}@1"), Var(f"block{k}@2")) for k in range(3)))
    axes = grid_axes(ctx)
    same = [cmp("==", p, q) for p, q in zip(i1, i2)]
    # a division in an element's index was computed before the access: a block whose divisor is 0 stops
    # there (the kernel fails) and never makes the access
    nonzero = [cmp("!=", y, 0) for _x, y in _divisions(same, {})]
    proto = _protocol_facts(ctx, a, m1, "@1", b, m2, "@2")
    if proto is False:
        return None  # both are the last arriver of one ticket: never in one launch
    cond = AND(c1, c2, _block_ranges("@1", axes), _block_ranges("@2", axes), other_block, *same, *nonzero,
               *_persistent(a, m1, b, m2), *_strided((c1, *i1), (c2, *i2)), *_division_lemmas((c1, c2, *same)),
               *proto)
    return a, b, cond, m1, m2, i1


def _report(ctx, a, b, cond, m1, m2, i1):
    model = check_linear_first(ctx, cond)
    if model is None:
        return None
    blk1 = tuple(int(model.get(f"block{k}@1", 0)) for k in range(3))
    blk2 = tuple(int(model.get(f"block{k}@2", 0)) for k in range(3))
    elem = tuple(int(ctx.eval(i, model)) for i in i1)
    verbs = {"write": "writes", "read": "reads", "atomic": "atomically updates"}
    cex = {"block": blk1, "coords": tuple(int(model.get(f"gc{d}@1", 0)) for d in range(len(a.shape))),
           "iteration": iteration_of(a.point, model, "@1"), "other_block": blk2,
           "other_coords": tuple(int(model.get(f"gc{d}@2", 0)) for d in range(len(b.shape))),
           "other_iteration": iteration_of(b.point, model, "@2"), "element": elem, "dims": dims_of(model)}
    msg = (f"data race on global tensor '{a.param}': block {blk1} {verbs[a.kind]} element {elem} that block "
           f"{blk2} {verbs[b.kind]}; blocks run concurrently in any order "
           "(give each block its own elements, or update them with tp.atomic_*)")
    return Finding("global_race", "error", msg, b.span, cex, a.span)


def _persistent(a, m1, b, m2):
    """Facts of persistent-grid loops (`for t in range(block_id(x), stop, num_blocks(x))`): an iteration of
    block b runs t = b + n * grid, so blocks that differ on axis x never run the same t (a consequence of the
    loops' constraints that the solver would need nonlinear reasoning to see)."""
    out = []
    for la in a.point.loops:
        ax = _persistent_axis(la)
        if ax is None:
            continue
        for lb in b.point.loops:
            if _persistent_axis(lb) == ax:
                out.append(OR(cmp("==", Var(f"block{ax}@1"), Var(f"block{ax}@2")),
                              cmp("!=", subst(la.var, m1), subst(lb.var, m2))))
    return out


def _strided(terms1, terms2) -> list:
    """Facts of persistent strides written out (`t = block_id(x) + n * num_blocks(x)`, any integer term n:
    a flat loop over a block's slots finds its tile as block + (slot // per_tile) * grid): two blocks that
    differ on axis x never compute the same t, as 0 <= block < grid (both blocks' b + n * grid are b mod
    grid). The same consequence of the blocks' ranges as `_persistent`'s, nonlinear for the solver."""
    one: dict = {}
    two: dict = {}
    for terms, out, suffix in ((terms1, one, "@1"), (terms2, two, "@2")):
        seen: set = set()
        for t in terms:
            _strides(t, suffix, out, seen)
    lemmas = []
    for (ax, _), t1 in one.items():
        for (ax2, _), t2 in two.items():
            if ax == ax2:
                lemmas.append(OR(cmp("==", Var(f"block{ax}@1"), Var(f"block{ax}@2")), cmp("!=", t1, t2)))
    return lemmas[:16]


def _strides(t, suffix, out: dict, seen: set):
    """{(axis, term): term} of the subterms block{axis}<suffix> + n * grid{axis} (either order) of a Sym or
    bool term (`seen`: ids of the shared subterms visited)."""
    if id(t) in seen:
        return
    seen.add(id(t))
    if isinstance(t, BinOp):
        if t.op == "+":
            for b, p in ((t.a, t.b), (t.b, t.a)):
                if isinstance(b, Var) and b.name.startswith("block") and b.name.endswith(suffix) \
                        and isinstance(p, BinOp) and p.op == "*":
                    ax = b.name[len("block"):-len(suffix)]
                    if any(isinstance(g, Var) and g.name == f"grid{ax}" for g in (p.a, p.b)):
                        out[(ax, t)] = t
        _strides(t.a, suffix, out, seen)
        _strides(t.b, suffix, out, seen)
    elif isinstance(t, tuple) and t and t[0] in ("cmp", "and", "or", "not"):
        for x in t[2:] if t[0] == "cmp" else t[1:]:
            _strides(x, suffix, out, seen)


def _division_lemmas(terms) -> list:
    """x1 == x2 where two divisions by run-time divisors have equal divisors, quotients and remainders (x =
    y * (x // y) + x % y): true of every model of the floor-division definitions, but a consequence the
    solver's nonlinear arithmetic does not find by itself (two blocks' tile coordinates from one tile index)."""
    found: dict = {}
    for t in terms:
        _divisions(t, found)
    pairs = list(found)
    out = []
    for i, (x1, y1) in enumerate(pairs):
        for x2, y2 in pairs[i + 1:]:
            out.append(OR(NOT(AND(cmp("==", y1, y2), cmp("!=", y1, 0), cmp("==", x1 // y1, x2 // y2),
                                  cmp("==", x1 % y1, x2 % y2))), cmp("==", x1, x2)))
    return out[:64]


def _duplicates(ctx, a):
    m1, c1, x1, i1 = _instance(a, "@1", False)
    # the same block and iteration: the second instance shares the loop variables
    m2 = dict(m1)
    coords2 = tuple(Var(f"gc{d}@2") for d in range(len(a.shape)))
    k = next(_ids)
    i2 = tuple(Var(f"gi{d}#{k}@2") if g is None else subst(g, m2) if not isinstance(g, int) else g
               for d, g in enumerate(a.indices(coords2)))
    mask2 = a.mask(coords2)
    c2 = AND(*(AND(cmp(">=", c, 0), cmp("<", c, n)) for c, n in zip(coords2, a.shape)),
             True if mask2 is True else subst(mask2, m2))
    distinct = OR(*(cmp("!=", p, q) for p, q in zip(x1, coords2)))
    model = ctx.solver.check(AND(c1, c2, distinct, *(cmp("==", p, q) for p, q in zip(i1, i2))))
    if model is None:
        return None
    elem = tuple(int(ctx.eval(i, model)) for i in i1)
    cex = {"block": tuple(int(model.get(f"block{k}", 0)) for k in range(3)),
           "coords": tuple(int(model.get(f"gc{d}@1", 0)) for d in range(len(a.shape))),
           "other_coords": tuple(int(model.get(f"gc{d}@2", 0)) for d in range(len(a.shape))),
           "iteration": iteration_of(a.point, model, "@1"), "element": elem, "dims": dims_of(model)}
    msg = (f"data race on global tensor '{a.param}': two elements of one scatter store write element {elem} "
           "(duplicate indices: which value lands depends on the schedule; use tp.atomic_* to combine them)")
    return Finding("global_race", "error", msg, a.span, cex)


def _where(span):
    return (getattr(span, "file", None), getattr(span, "line", None), getattr(span, "col", None)) \
        if span is not None else None
