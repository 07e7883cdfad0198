"""Out-of-bounds accesses. Shared memory: every stage index must lie in [0, stages) for every iteration and
block (an SMT query per access), and every in-stage offset below the stage size (exact over all slots).
Global memory: views are masked at the tensor's bounds by the language (loads read `other`, stores and
copies skip), so a global access cannot leave its tensor; explicit masks only restrict further."""

from __future__ import annotations

import numpy as np

from ..counterexample import block_of, dims_of, instance, iteration_of, rename, thread_fields
from ..report import Finding
from ..vc import AND, OR, cmp


def check(ctx) -> list:
    out = []
    seen = set()
    ws = ctx.analysis.target.warp_size
    for a in ctx.analysis.accesses:
        n = a.alloc.stages
        key = (id(a.op), id(a.alloc))
        if key in seen:
            continue
        m, c = instance(a.point, "@1")
        stage = rename(a.stage, m)
        model = ctx.solver.check(AND(c, OR(cmp("<", stage, 0), cmp(">=", stage, n))))
        if model is not None:
            seen.add(key)
            s = ctx.eval(stage, model)
            cex = {"block": block_of(model), **thread_fields(int(a.thr[0]), ws), "stage": s,
                   "iteration": iteration_of(a.point, model, "@1"), "dims": dims_of(model),
                   "detail": f"stage index {s} of shared tile '{ctx.name_of(a.alloc)}' outside 0..{n - 1}"}
            out.append(Finding("out_of_bounds", "error",
                               f"shared tile '{ctx.name_of(a.alloc)}' indexed at stage {s}; it has {n} stage(s)",
                               a.span, cex, a.alloc.span))
            continue
        bad = np.nonzero((a.off < 0) | (a.off >= a.alloc.stage_elems))[0]
        if bad.size:
            i = int(bad[0])
            seen.add(key)
            cex = {**thread_fields(int(a.thr[i]), ws), "value": int(a.val[i]),
                   "coords": tuple(int(x[i]) for x in a.coords), "address": int(a.off[i]) * a.eb}
            out.append(Finding("out_of_bounds", "error",
                               f"shared tile '{ctx.name_of(a.alloc)}': element offset {int(a.off[i])} is outside "
                               f"the stage's {a.alloc.stage_elems} elements", a.span, cex, a.alloc.span))
    return out
