"""Turning SMT models into counterexamples: concrete block, warp, lane, thread, value, iteration, coordinates.

A query about one or two instances of events renames each instance's loop variables with a suffix
(``k#3@1``); `iteration_of` reads them back as ``{"k": 5}`` in source names."""

from __future__ import annotations

import numpy as np

from .vc import AND, cmp, subst


def instance(point, suffix: str):
    """(renaming, constraint) of one instance of a program point: its loops' ranges and path condition."""
    m = point.instance(suffix)
    return m, subst(point.constraint(), m)


def rename(term, m):
    return subst(term, m) if m else term


def counter(point, key: str, m):
    return rename(point.counters.get(key, 0), m)


def iteration_of(point, model: dict, suffix: str) -> dict:
    out = {}
    for lp in point.loops:
        v = model.get(lp.var.name + suffix)
        if v is not None:
            out[lp.name] = v
    return out


def block_of(model: dict) -> tuple:
    return tuple(int(model.get(f"block{a}", 0)) for a in range(3))


def thread_fields(t: int, warp_size: int) -> dict:
    t = int(t)
    return {"thread": t, "warp": t // warp_size, "lane": t % warp_size}


def dims_of(model: dict) -> dict:
    return {k[4:]: v for k, v in model.items() if k.startswith("dim:")}


def holder(layout, coords) -> tuple[int, int] | None:
    """A (thread, value) slot of `layout` holding tile element `coords` (the lowest thread)."""
    if layout is None:
        return None
    hit = np.ones((layout.num_threads, layout.num_values), dtype=bool)
    for c, x in zip(layout.coords, coords):
        hit &= c == int(x)
    idx = np.argwhere(hit)
    if idx.size == 0:
        return None
    return int(idx[0][0]), int(idx[0][1])


def coord_ranges(coords, shape):
    return AND(*(AND(cmp(">=", c, 0), cmp("<", c, n)) for c, n in zip(coords, shape)))
