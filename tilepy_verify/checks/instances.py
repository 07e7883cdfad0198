"""One instance of a global access for the cross-block checks (global_race, tickets): its own loop variables,
block ids and tile coordinates, renamed by a suffix; the grid axes a kernel reads; the floor divisions by run-time
divisors in a term. Shared by global_race and tickets (which each need the other's queries to be about the same
instances), so it is a module of its own."""

from __future__ import annotations

import itertools

from tilepy.symbolic import BinOp, Var

from ..vc import AND, cmp, const_of, in_range, subst, term_vars

_ids = itertools.count()


_INSTANCES: dict = {}  # (id of the access, suffix, blocks) -> (access, instance): one per check run


def _instance(acc, suffix: str, blocks: bool):
    """(renaming, constraint, coords, indices) of one instance of a global access: its own loop variables
    (and block ids, when `blocks`), tile coordinates and, where the index is unknown, a free index. Made once
    per access and suffix in a check run, so the queries of its pairs share its terms (and their encodings,
    lemmas and abstractions)."""
    key = (id(acc), suffix, blocks)
    hit = _INSTANCES.get(key)
    if hit is None or hit[0] is not acc:
        hit = _INSTANCES[key] = (acc, _make_instance(acc, suffix, blocks))
    m, cond, coords, idx = hit[1]
    return dict(m), cond, coords, idx


def _make_instance(acc, suffix: str, blocks: bool):
    m = acc.point.instance(suffix)
    coords = tuple(Var(f"gc{d}{suffix}") for d in range(len(acc.shape)))
    raw = acc.indices(coords)
    mask = acc.mask(coords)
    # a persistent-grid loop keeps only its range: its stride and trip count (nonlinear in the grid size) are
    # dropped, which only adds instances (sound); `_persistent` states what the stride gave (blocks never
    # share an iteration)
    where = AND(acc.point.path, *(in_range(lp.var, lp.start, lp.stop) if blocks and _persistent_axis(lp) is not None
                                  else lp.constraint() for lp in acc.point.loops))
    if blocks:
        m.update({f"block{a}": Var(f"block{a}{suffix}") for a in range(3)})
        # another block computes its own values: every fresh variable of the walk (an unknown, a min / max
        # defined by facts in the path) is its own in each block
        names = term_vars(where) | term_vars(mask if mask is not True else True)
        for g in raw:
            if g is not None and not isinstance(g, int):
                names |= term_vars(g)
        for name in names:
            if "#" in name and "@" not in name and name not in m:
                m[name] = Var(name + suffix)
    k = next(_ids)
    idx = tuple(Var(f"gi{d}#{k}{suffix}") if g is None else subst(g, m) if not isinstance(g, int) else g
                for d, g in enumerate(raw))
    cond = AND(subst(where, m),
               *(AND(cmp(">=", c, 0), cmp("<", c, n)) for c, n in zip(coords, acc.shape)),
               *(AND(cmp(">=", i, 0), cmp("<", i, n)) for i, n in zip(idx, acc.dims)),
               True if mask is True else subst(mask, m))
    return m, cond, coords, idx


def _block_ranges(suffix: str, axes):
    """Block ids inside the grid; a grid axis the kernel never reads (no block_id / num_blocks of it) is
    taken to be 1, as a kernel launched over fewer axes has it."""
    return AND(*(cmp("<", Var(f"block{a}{suffix}"), Var(f"grid{a}")) if a in axes else
                 cmp("==", Var(f"block{a}{suffix}"), 0) for a in range(3)))


def grid_axes(ctx) -> set:
    """The grid axes the kernel reads (computed once per analysis)."""
    axes = ctx.__dict__.get("_grid_axes")
    if axes is None:
        axes = ctx.__dict__["_grid_axes"] = _grid_axes(ctx.analysis.kir)
    return axes


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


def clear_instances():
    """A new check run: instances are made afresh."""
    _INSTANCES.clear()


def _divisions(t, out: dict):
    """Floor divisions and remainders by a run-time divisor in a Sym / bool term: {(x, y): None}."""
    if isinstance(t, BinOp):
        if t.op in ("//", "%") and const_of(t.b) is None:
            out[(t.a, t.b)] = None
        _divisions(t.a, out)
        _divisions(t.b, out)
    elif isinstance(t, list):
        for x in t:
            _divisions(x, out)
    elif isinstance(t, tuple) and t and t[0] in ("cmp", "and", "or", "not"):
        for x in t[2:] if t[0] == "cmp" else t[1:]:
            _divisions(x, out)
    return out


def _persistent_axis(lp):
    s, st = lp.start, lp.step
    for ax in range(3):
        if isinstance(s, Var) and s.name == f"block{ax}" and isinstance(st, Var) and st.name == f"grid{ax}":
            return ax
    return None
