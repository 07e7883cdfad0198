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

import itertools

from tilepy.symbolic import Var

from ..counterexample import dims_of, iteration_of
from ..report import Finding
from ..vc import AND, OR, cmp, subst

_ids = itertools.count()


def _instance(acc, suffix: str, blocks: bool):
    """(renaming, constraint, coords, indices) of one instance of a global access: its own loop variables
    (and block ids, when `blocks`), tile coordinates and, where the index is unknown, a free index."""
    m = acc.point.instance(suffix)
    if blocks:
        m.update({f"block{a}": Var(f"block{a}{suffix}") for a in range(3)})
    coords = tuple(Var(f"gc{d}{suffix}") for d in range(len(acc.shape)))
    k = next(_ids)
    idx = tuple(Var(f"gi{d}#{k}{suffix}") if g is None else subst(g, m) if not isinstance(g, int) else g
                for d, g in enumerate(acc.indices(coords)))
    mask = acc.mask(coords)
    cond = AND(subst(acc.point.constraint(), m),
               *(AND(cmp(">=", c, 0), cmp("<", c, n)) for c, n in zip(coords, acc.shape)),
               *(AND(cmp(">=", i, 0), cmp("<", i, n)) for i, n in zip(idx, acc.dims)),
               True if mask is True else subst(mask, m))
    return m, cond, coords, idx


def _block_ranges(suffix: str, axes):
    """Block ids inside the grid; a grid axis the kernel never reads (no block_id / num_blocks of it) is
    taken to be 1, as a kernel launched over fewer axes has it."""
    return AND(*(cmp("<", Var(f"block{a}{suffix}"), Var(f"grid{a}")) if a in axes else
                 cmp("==", Var(f"block{a}{suffix}"), 0) for a in range(3)))


def _grid_axes(kir) -> set:
    from tilepy import ir

    axes = set()
    for s in ir.walk(kir.body):
        roots = [getattr(s, k, None) for k in ("value", "call", "cond", "start", "stop", "step")]
        for r in roots:
            if isinstance(r, ir.Expr):
                for e in ir.walk_exprs(r):
                    if isinstance(e, ir.Call) and e.op in ("block_id", "num_blocks"):
                        axes.add(int(e.attrs.get("axis", 0)))
    return axes


def check(ctx) -> list:
    out = []
    accs = ctx.analysis.global_accesses
    for i, a in enumerate(accs):
        if a.kind == "write":
            f = _duplicates(ctx, a)
            if f is not None:
                out.append(f)
        for b in accs[i:]:
            if a.param != b.param or "write" not in (a.kind, b.kind):
                continue  # atomics combine; reads alone cannot race
            f = _pair(ctx, a, b)
            if f is not None:
                out.append(f)
    return out


def _pair(ctx, a, b):
    m1, c1, x1, i1 = _instance(a, "@1", True)
    m2, c2, x2, i2 = _instance(b, "@2", True)
    other_block = OR(*(cmp("!=", Var(f"block{k}@1"), Var(f"block{k}@2")) for k in range(3)))
    axes = ctx.__dict__.setdefault("_grid_axes", _grid_axes(ctx.analysis.kir))
    cond = AND(c1, c2, _block_ranges("@1", axes), _block_ranges("@2", axes), other_block,
               *(cmp("==", p, q) for p, q in zip(i1, i2)))
    model = ctx.solver.check(cond)
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
