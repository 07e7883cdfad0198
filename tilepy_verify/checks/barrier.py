"""Barriers under thread-dependent control flow: a `tp.barrier()` that some threads of the block never
reach (on hardware: a deadlock or undefined behaviour). The counterexample names one thread that reaches it
and one that does not. mbarrier waits that can never return are the `deadlock` check (deadlock.py)."""

from __future__ import annotations

import numpy as np

from ..counterexample import thread_fields
from ..report import Finding


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
    return out
