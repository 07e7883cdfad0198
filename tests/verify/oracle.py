"""Dynamic ground truth for the verifier's tests: run a kernel on the CPU interpreter with access recording
and read races, pipeline hazards, out-of-bounds accesses and barrier divergence off the trace.

Bulk copies are judged by happens-before between threads (vector clocks over the trace's barriers and
mbarrier arrive -> complete -> wait events), never by the interpreter's lock-step order: an access before a
copy's issue must happen before the issue (same thread, or a barrier / arrive -> wait chain from the
accessing thread to the issuing one); an access after it must follow a wait for the copy's phase (by the
accessing thread, or by a thread that happens before the access). Plain accesses of two threads in one barrier
interval of a block with mbarriers are a race only when neither happens before the other (roles that hand a
stage over with store -> arrive -> wait -> read are ordered)."""

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
    deadlock: list = field(default_factory=list)  # an mbarrier wait no arrival completes
    error: str | None = None
    trace: object = None
    unretired: bool = False

    def kinds(self) -> set:
        return {k for k in ("race", "pipeline_hazard", "out_of_bounds", "barrier_divergence", "deadlock")
                if getattr(self, k)}

    def classes(self) -> set:
        """What the seeded corpora compare against a bug's expected symptom: hazard (a race or pipeline hazard),
        oob, divergence, deadlock."""
        names = {"race": "hazard", "pipeline_hazard": "hazard", "out_of_bounds": "oob",
                 "barrier_divergence": "divergence", "deadlock": "deadlock"}
        return {names[k] for k in self.kinds()}


def run(kir, grid, args) -> Observed:
    obs = Observed()
    try:
        trace = run_ir(kir, grid, args, record=True)
    except InterpreterError as exc:
        msg = str(exc)
        obs.error = msg
        if "out of range" in msg or "outside the stage" in msg:
            obs.out_of_bounds.append(msg)
        elif "barrier() inside a role branch" in msg:
            obs.barrier_divergence.append(msg)
        elif "deadlock" in msg:
            obs.deadlock.append(msg)
        elif "barrier" in msg and "role" in msg:
            obs.barrier_divergence.append(msg)
        return obs
    obs.trace = trace
    # copies still in flight when the block ended (the interpreter never lands them; hardware may land them
    # at any time after issue): evidence for a hazard on reads after the issue, not a violation by itself
    obs.unretired = any(e.kind == "async_unretired" for e in trace.events)
    _races(trace, obs)
    _hazards(trace, obs)
    return obs


def _is_async(trace, ops, kinds=("copy_async", "copy_bulk")):
    names = np.array([getattr(n, "op", "") for n in trace.ops] + [""])
    return np.isin(names[ops], list(kinds))


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
    ends = np.r_[starts[1:], len(k)]
    sq = s["seq"][order]
    mbar = {e.block for e in trace.events if e.kind == "mbarrier_arrive"}
    clocks: dict = {}
    found = 0
    for b in bad:
        if found >= 400:
            break
        blk, buf, off, itv = (int(x) for x in k[starts[b]])
        if blk in mbar:  # roles ordered through mbarriers inside one interval: judge by happens-before
            ck = clocks.get(blk) or clocks.setdefault(blk, Clocks(trace, blk))
            if not _unordered(ck, t[starts[b]:ends[b]], sq[starts[b]:ends[b]], w[starts[b]:ends[b]]):
                continue
        found += 1
        obs.race.append({"block": blk, "buffer": buf, "offset": off, "interval": itv,
                         "threads": (int(tmin[b]), int(tmax[b]))})


def _unordered(ck, thr, seq, wr) -> bool:
    """Do two of these accesses of one element (threads, trace positions, write flags) by different threads,
    one a write, happen in no happens-before order?"""
    i, j = np.nonzero((seq[:, None] < seq[None, :]) & (thr[:, None] != thr[None, :]) & (wr[:, None] | wr[None, :]))
    if i.size == 0:
        return False
    return not ck.before(thr[i], seq[i], thr[j], seq[j]).all()


def _key(rows):
    return rows["block"].astype(np.int64) * (1 << 40) + rows["buffer"].astype(np.int64) * (1 << 32) + rows["offset"]


def _hazards(trace, obs):
    a = trace.accesses
    a = a[a["space"] == SHARED]
    if a.size == 0:
        return
    _bulk_hazards(trace, obs, a)
    asy = _is_async(trace, a["op"], ("copy_async",)) & a["write"]
    copies, others = a[asy], a[~(_is_async(trace, a["op"], ("copy_bulk",)) & a["write"])]
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


# ------------------------------------------------------------------------------------------ happens-before


def _threads_of(text: str) -> np.ndarray:
    """Thread ids of an Event.threads string ('threads 0-31, 64-95')."""
    out = []
    for part in text.removeprefix("threads ").split(","):
        part = part.strip()
        if not part or part == "no threads":
            continue
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return np.array(out, dtype=np.int64)


class Clocks:
    """Vector clocks of one block's threads after each synchronization event (barrier: everyone joins;
    mbarrier arrive: the arriving threads release into the barrier's clock; phase completion: snapshot;
    wait for phase q: the waiting threads acquire phase q's snapshot). `at(threads, seqs)` gives the clock
    rows of those threads just before those points; access (t1, s1) happens before (t2, s2) when
    at(t2, s2)[t1] >= own(t1, s1)."""

    def __init__(self, trace, block: int):
        T = trace.num_threads
        vc = np.full((T, T), -1, dtype=np.int32)
        np.fill_diagonal(vc, 0)
        self.seqs, self.snaps = [-1], [vc.copy()]
        acc: dict = {}
        phases: dict = {}
        for e in sorted((e for e in trace.events if e.block == block), key=lambda e: e.seq):
            if e.kind == "barrier":
                vc[:] = vc.max(axis=0)
                vc[np.arange(T), np.arange(T)] += 1
            elif e.kind == "mbarrier_arrive":
                t = _threads_of(e.threads)
                acc[e.target] = np.maximum(acc.get(e.target, np.full(T, -1, np.int32)), vc[t].max(axis=0))
                vc[t, t] += 1
            elif e.kind == "mbarrier_complete":
                phases[(e.target, int(e.value) - 1)] = acc[e.target].copy()
            elif e.kind == "mbarrier_wait":
                got = phases.get((e.target, int(e.value)))
                if got is not None:
                    t = _threads_of(e.threads)
                    vc[t] = np.maximum(vc[t], got)
            else:
                continue
            self.seqs.append(e.seq)
            self.snaps.append(vc.copy())
        self.seqs = np.array(self.seqs)
        self.snaps = np.stack(self.snaps)

    def _idx(self, seqs):
        return np.searchsorted(self.seqs, np.asarray(seqs), "left") - 1

    def rows(self, threads, seqs):
        return self.snaps[self._idx(seqs), np.asarray(threads)]

    def own(self, threads, seqs):
        t = np.asarray(threads)
        return self.snaps[self._idx(seqs), t, t]

    def before(self, t1, s1, t2, s2):
        """Elementwise: access (t1, s1) happens before (t2, s2) (program order for one thread)."""
        t1, s1, t2, s2 = (np.broadcast_to(np.asarray(x), np.broadcast_shapes(np.shape(t1), np.shape(t2)))
                          for x in (t1, s1, t2, s2))
        same = (t1 == t2) & (s1 < s2)
        return same | ((s1 < s2) & (self.rows(t2, s2)[np.arange(t1.size).reshape(t1.shape), t1]
                                    >= self.own(t1, s1)))


def _bulk_hazards(trace, obs, a):
    bulk = _is_async(trace, a["op"], ("copy_bulk",)) & a["write"]
    if not bulk.any():
        return
    issues = {e.seq: e for e in trace.events if e.kind == "copy_bulk"}
    waits = [e for e in trace.events if e.kind == "mbarrier_wait"]
    clocks: dict = {}
    copies = a[bulk]
    for seq in np.unique(copies["seq"]):
        c = copies[copies["seq"] == seq]
        blk, buf, tc = int(c["block"][0]), int(c["buffer"][0]), int(c["thread"][0])
        ev = next((issues[s] for s in sorted(issues) if s > seq and issues[s].block == blk), None)
        if ev is None:
            continue
        bar, phase = ev.target, int(ev.value)
        ck = clocks.get(blk) or clocks.setdefault(blk, Clocks(trace, blk))
        rows = a[(a["block"] == blk) & (a["buffer"] == buf) & np.isin(a["offset"], c["offset"]) & (a["seq"] != seq)]
        if rows.size == 0:
            continue
        r_bulk = _is_async(trace, rows["op"], ("copy_bulk",)) & rows["write"]
        early = rows["seq"] < seq
        # before the issue: the access (or, for an earlier bulk copy, its landing) happens before the issue
        ok_before = ck.before(rows["thread"], rows["seq"], np.full(rows.size, tc), np.full(rows.size, seq))
        for i in np.nonzero(early & r_bulk)[0]:  # an earlier copy into the element: landed before the issue
            ok_before[i] = _landed(trace, ck, waits, rows[i], issues, tc, seq)
        # after the issue: a wait for the copy's phase happens before the access
        late = ~early
        ok_after = np.zeros(rows.size, dtype=bool)
        for w in waits:
            if w.block != blk or w.target != bar or int(w.value) < phase or w.seq < seq:
                continue
            wt = _threads_of(w.threads)
            sel = late & ~ok_after & (rows["seq"] > w.seq)
            if not sel.any():
                continue
            idx = np.nonzero(sel)[0]
            direct = np.isin(rows["thread"][idx], wt)
            rws = ck.rows(rows["thread"][idx], rows["seq"][idx])[:, wt]
            ok_after[idx] = direct | (rws >= ck.own(wt, np.full(wt.size, w.seq))[None, :]).any(axis=1)
        bad = (early & ~ok_before) | (late & ~ok_after)
        if bad.any() and len(obs.pipeline_hazard) < 400:
            r = rows[np.nonzero(bad)[0][0]]
            obs.pipeline_hazard.append({"block": blk, "buffer": buf, "offset": int(r["offset"]), "copy_thread": tc,
                                        "thread": int(r["thread"]), "bulk": True,
                                        "copy_iteration": trace.iterations[int(c["iteration"][0])],
                                        "iteration": trace.iterations[int(r["iteration"])]})


def _landed(trace, ck, waits, row, issues, t2, s2) -> bool:
    """Has the bulk copy of landing row `row` landed and become visible to thread t2 before seq s2?"""
    ev = next((issues[s] for s in sorted(issues) if s > row["seq"] and issues[s].block == row["block"]), None)
    if ev is None:
        return False
    for w in waits:
        if w.block != ev.block or w.target != ev.target or int(w.value) < int(ev.value) or not (
                row["seq"] < w.seq < s2):
            continue
        wt = _threads_of(w.threads)
        if t2 in wt or (ck.rows([t2], [s2])[0][wt] >= ck.own(wt, np.full(wt.size, w.seq))).any():
            return True
    return False
