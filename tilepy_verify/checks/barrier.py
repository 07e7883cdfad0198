"""Barriers under thread-dependent control flow: a `tp.barrier()` that some threads of the block never
reach (on hardware: a deadlock or undefined behaviour). The counterexample names one thread that reaches it
and one that does not.

Also mbarrier waits that can never return (a deadlock, reported under this check): for an mbarrier that
one role arrives on (sync.py), `mbarrier_wait(bar, q)` needs the ((q + 1) count)-th arrival; the query asks
for an instance of the wait for which no arrive op has an instance with exactly that index that runs. Waits
on an mbarrier several roles arrive on are not checked, and neither are cycles of waits (each arrival is
assumed to be reached once it exists)."""

from __future__ import annotations

import numpy as np

from ..counterexample import block_of, instance, iteration_of, rename, thread_fields
from ..report import Finding
from ..sync import Sync, latest_counted, sole_role
from ..vc import AND, NOT, OR, cmp, subst


def check(ctx) -> list:
    out = []
    ws = ctx.analysis.target.warp_size
    for b in ctx.analysis.barriers:
        if b.divergent is None:
            continue
        node, mask = b.divergent
        cex = {"block": (0, 0, 0)}
        if mask is not None:
            inside = np.nonzero(mask)[0]
            outside = np.nonzero(~mask)[0]
            threads = b.point.threads
            reach = int(threads[0]) if threads is not None and len(threads) else int(inside[0]) if len(inside) else 0
            miss_pool = np.setdiff1d(np.arange(len(mask)), threads) if threads is not None else outside
            cex.update(thread_fields(reach, ws))
            if len(miss_pool):
                o = thread_fields(int(miss_pool[0]), ws)
                cex["other_thread"] = o["thread"]
                cex["detail"] = (f"thread {reach} (warp {reach // ws}) reaches the barrier; thread {o['thread']} "
                                 f"(warp {o['warp']}, lane {o['lane']}) does not")
        else:
            cex["detail"] = "the branch condition depends on the thread id"
        out.append(Finding("barrier_divergence", "error",
                           "barrier under thread-dependent control flow: not every thread of the block reaches it",
                           b.span, cex, node.span))
    return out + deadlocks(ctx)


def deadlocks(ctx) -> list:
    A = ctx.analysis
    sync = Sync(A)
    out = []
    for w in sync.waits:
        C = A.mbarriers.get(w.bar)
        role = sole_role(A, w.bar)
        if C is None or (role is None and A.arrive_roles.get(w.bar)):
            continue
        mw, cw = instance(w.point, "@1")
        need = (rename(w.phase, mw) + 1) * C  # arrivals that complete phase q
        done = []
        for x in A.arrives:
            if x.bar != w.bar or not sync.exact_arrive(x):
                continue
            got = latest_counted(x.point, x.index, x.key, need)
            if got is None:
                done = [True]
                break
            mx, vx = got
            done.append(AND(vx, subst(x.point.path, mx), subst(x.valid, mx),
                            cmp("==", subst(x.index, mx), need - 1)))
        model = ctx.solver.check(AND(cw, NOT(OR(*done))))
        if model is None:
            continue
        t = w.point.threads
        first = int(t[0]) if t is not None and len(t) else 0
        q = ctx.eval(rename(w.phase, mw), model)
        bar = w.bar.removeprefix("mbar:")
        its = iteration_of(w.point, model, "@1")
        ws = A.target.warp_size
        threads = f"threads {int(t.min())}..{int(t.max())}" if t is not None and len(t) else "all threads"
        cex = {"block": block_of(model), **thread_fields(first, ws), "iteration": its, "phase": q,
               "roles": (threads,),
               "detail": (f"{threads} wait at iteration {its or '(before loops)'} for phase {q} of '{bar}' "
                          f"(count {C}), which needs {(q + 1) * C} arrivals; "
                          + ("nothing arrives on it" if not done else "the arrive ops on it never make that many"))}
        other = next((x.span for x in A.arrives if x.bar == w.bar), None)
        out.append(Finding("barrier_divergence", "error",
                           f"deadlock: mbarrier_wait on '{bar}' can wait for a phase that never completes",
                           w.span, cex, other))
    return out
