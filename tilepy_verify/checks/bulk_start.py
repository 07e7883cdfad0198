"""Bulk tensor copies start on a 16-byte column. The copy engine (TMA) faults on a box whose first element is off
a 16-byte boundary (H100: an illegal instruction, loads and stores alike: benchmarks/profile/lead_tma_offset.py).
The GPU render tests the first column of a copy that has another path (tilepy_hip/render/tma.py `start_guard`);
a TMA-only one (`copy_bulk(..., fallback=False)`, `copy_bulk(..., multicast=...)`, `store_bulk(..., fallback=False)`)
has none, so its first column times the element bytes must be a multiple of 16 in every block and iteration. One SMT
query per such copy asks for a block and iteration where it is not; a model is the counterexample. Copies whose
first element lies outside the tensor in that instance are not asked about (the view's index ranges constrain the
query as in the global race check). A start that is syntactically a multiple (`_multiple`: tile-multiple columns)
needs no query."""

from __future__ import annotations

from tilepy.symbolic import BinOp, Const, Var

from ..counterexample import dims_of, iteration_of
from ..report import Finding
from ..vc import AND, cmp, subst
from .instances import _block_ranges, _instance, grid_axes


def _multiple(t, q: int) -> bool:
    """A sufficient, syntactic proof that term t is a multiple of q for every value of its variables (products
    with a multiple, sums and differences of multiples, remainders by a multiple of a multiple, left shifts): most
    TMA starts are tile multiples (k * BK, n0 + p * STORE_N), which then need no SMT query."""
    if isinstance(t, bool):
        return False
    if isinstance(t, int):
        return t % q == 0
    if isinstance(t, Const):
        return t.value % q == 0
    if isinstance(t, BinOp):
        if t.op == "*":
            return _multiple(t.a, q) or _multiple(t.b, q)
        if t.op in ("+", "-"):
            return _multiple(t.a, q) and _multiple(t.b, q)
        if t.op == "%":
            return _multiple(t.a, q) and _multiple(t.b, q)
        if t.op == "<<" and isinstance(t.b, (int, Const)):
            sh = t.b if isinstance(t.b, int) else t.b.value
            return _multiple(t.a, q) or (1 << sh) % q == 0
    return False


def _tma_only(e) -> bool:
    if getattr(e, "op", None) not in ("copy_bulk", "store_bulk"):
        return False
    return not e.attrs.get("fallback", True) or e.attrs.get("multicast") is not None


def check(ctx) -> list:
    out = []
    seen = set()
    for a in ctx.analysis.global_accesses:
        e = a.op
        if not _tma_only(e) or id(e) in seen or not a.shape:
            continue
        seen.add(id(e))
        view = e.args[0] if e.op == "copy_bulk" else e.args[1]
        eb = view.type.dtype.bytes
        if 16 % eb or eb >= 16:
            continue
        q = 16 // eb
        m, cond, coords, idx = _instance(a, "@1", True)
        first = {c.name: 0 for c in coords}
        start = idx[-1]
        if start is None or isinstance(start, Var) and start.name.startswith("gi"):
            continue  # an index the analysis cannot compute: not a view a tensor map describes
        start0 = subst(start, first) if not isinstance(start, int) else start
        if _multiple(start0, q):
            continue
        if isinstance(start0, int):
            if start0 % q == 0:
                continue
            model = {}
        else:
            model = ctx.solver.check(AND(subst(cond, first), _block_ranges("@1", grid_axes(ctx)),
                                         cmp("!=", start0 % q, 0)))
            if model is None:
                continue
        col = start0 if isinstance(start0, int) else int(ctx.eval(start0, model))
        what = "tp.store_bulk" if e.op == "store_bulk" else "tp.copy_bulk"
        cex = {"block": tuple(int(model.get(f"block{k}@1", 0)) for k in range(3)),
               "iteration": iteration_of(a.point, model, "@1"), "dims": dims_of(model),
               "detail": f"first column {col}: {col * eb} bytes, not a multiple of 16"}
        out.append(Finding(
            "bulk_copy_start", "error",
            f"{what} of '{a.param}' (TMA only) may start at column {col}, off a 16-byte boundary, where the copy "
            f"engine faults; start it at a multiple of {q} {view.type.dtype.name} columns, or let it fall back "
            "(fallback=True)", a.span, cex))
    return out
