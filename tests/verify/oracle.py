"""Dynamic ground truth for the verifier's tests: run a kernel on the CPU interpreter with access recording
and read races, pipeline hazards, out-of-bounds accesses and barrier divergence off the trace."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tilepy.errors import InterpreterError
from tilepy.interpreter import run_ir

SHARED = 1


@dataclass
class Observed:
    race: list = field(default_factory=list)  # dicts: block, threads, offset, buffer, interval, ops
    pipeline_hazard: list = field(default_factory=list)
    out_of_bounds: list = field(default_factory=list)  # error messages
    barrier_divergence: list = field(default_factory=list)
    error: str | None = None
    trace: object = None
    unretired: bool = False

    def kinds(self) -> set:
        return {k for k in ("race", "pipeline_hazard", "out_of_bounds", "barrier_divergence") if getattr(self, k)}


def run(kir, grid, args) -> Observed:
    obs = Observed()
    try:
        trace = run_ir(kir, grid, args, record=True)
    except InterpreterError as exc:
        msg = str(exc)
        obs.error = msg
        if "out of range" in msg or "outside the stage" in msg:
            obs.out_of_bounds.append(msg)
        elif "barrier() inside a role branch" in msg or "barrier" in msg and "role" in msg:
            obs.barrier_divergence.append(msg)
        return obs
    obs.trace = trace
    # copies still in flight when the block ended (the interpreter never lands them; hardware may land them
    # at any time after issue): evidence for a hazard on reads after the issue, not a violation by itself
    obs.unretired = any(e.kind == "async_unretired" for e in trace.events)
    _races(trace, obs)
    _hazards(trace, obs)
    return obs


def _is_async(trace, ops):
    names = np.array([getattr(n, "op", "") for n in trace.ops] + [""])
    return np.isin(names[ops], ["copy_async", "copy_bulk"])


def _races(trace, obs):
    a = trace.accesses
    a = a[a["space"] == SHARED]
    if a.size == 0:
        return
    asy = _is_async(trace, a["op"]) & a["write"]
    s = a[~asy]
    # one row per (block, buffer, offset, interval) group: a write and two different threads -> race
    key = np.stack([s["block"], s["buffer"], s["offset"], s["interval"]], axis=1)
    order = np.lexsort(key.T[::-1])
    k, t, w = key[order], s["thread"][order], s["write"][order]
    starts = np.r_[0, np.nonzero(np.any(k[1:] != k[:-1], axis=1))[0] + 1]
    tmin = np.minimum.reduceat(t, starts)
    tmax = np.maximum.reduceat(t, starts)
    anyw = np.maximum.reduceat(w.astype(np.int8), starts) > 0
    bad = np.nonzero(anyw & (tmin != tmax))[0]
    for b in bad[:400]:
        blk, buf, off, itv = (int(x) for x in k[starts[b]])
        obs.race.append({"block": blk, "buffer": buf, "offset": off, "interval": itv,
                         "threads": (int(tmin[b]), int(tmax[b]))})


def _key(rows):
    return rows["block"].astype(np.int64) * (1 << 40) + rows["buffer"].astype(np.int64) * (1 << 32) + rows["offset"]


def _hazards(trace, obs):
    a = trace.accesses
    a = a[a["space"] == SHARED]
    if a.size == 0:
        return
    asy = _is_async(trace, a["op"]) & a["write"]
    copies, others = a[asy], a
    if copies.size == 0:
        return
    waits = [e for e in trace.events if e.kind in ("wait_async", "mbarrier_wait")]
    key_o = _key(others)
    order = np.argsort(key_o, kind="stable")
    key_sorted = key_o[order]
    key_c = _key(copies)
    lo = np.searchsorted(key_sorted, key_c, "left")
    hi = np.searchsorted(key_sorted, key_c, "right")
    for i in range(copies.size):
        if len(obs.pipeline_hazard) >= 400:
            break
        c = copies[i]
        rows = others[order[lo[i]:hi[i]]]
        rows = rows[rows["seq"] != c["seq"]]
        if rows.size == 0:
            continue
        ic, ie, tc, sc = int(c["interval"]), int(c["interval_end"]), int(c["thread"]), int(c["seq"])
        r_async = _is_async(trace, rows["op"]) & rows["write"]
        after = rows["seq"] > sc
        early = after & (rows["interval"] < ie)
        same_end = after & (rows["interval"] == ie)
        cross = same_end & (rows["thread"] != tc)
        own = same_end & (rows["thread"] == tc)
        if own.any():  # the own thread sees its copy after the retiring wait
            ws = [e.seq for e in waits if e.block == int(c["block"]) and e.interval == ie and e.seq > sc]
            first_wait = min(ws) if ws else None
            own &= (rows["seq"] < first_wait) if first_wait is not None else True
        war = (~after) & (rows["interval"] == ic) & (rows["thread"] != tc) & ~r_async
        bad = early | cross | own | war
        if bad.any():
            r = rows[np.nonzero(bad)[0][0]]
            obs.pipeline_hazard.append({"block": int(c["block"]), "buffer": int(c["buffer"]),
                                        "offset": int(c["offset"]), "copy_thread": tc, "thread": int(r["thread"]),
                                        "copy_iteration": trace.iterations[int(c["iteration"])],
                                        "iteration": trace.iterations[int(r["iteration"])]})
