"""Coverage of store-only outputs written by a persistent tile loop: some element is never written.

Where a kernel's only access to a global tensor P is one `tp.store` inside a persistent-grid loop
`for t in range(block_id(x), stop, num_blocks(x))` (the only grid axis the kernel reads), the blocks run
every t in [0, stop) exactly once between them, whatever the grid (>= 1 block): so the store has at most
stop * E element writes (E: the stored tile's elements). When stop * E <= |P| (the tensor's elements) and one
executed write lands outside P (the language masks it off: it writes nothing), fewer than |P| elements are
written: at least one element of P is never written (pigeonhole). One query per such store asks for sizes,
an iteration t in [0, stop) whose path holds and a tile element whose index leaves P, with stop * E <= |P|:
a grouped tile order that maps the ragged last group with `% GROUP_M` instead of `% gm` is caught this way.

What it does not cover (no finding, never a false one): stores outside such a loop (a plain grid's size is
the launch's, unknown to the verifier), tensors the kernel also reads or writes elsewhere, indices through
values the analysis does not follow (a block id beside the loop, an unknown, a loaded index), and elements
left unwritten by two writes landing on one element (two blocks: the global_race check) or by a skipped
iteration (a guard that is false for some t), or where stop * E > |P| (tiles that overhang the tensor).
Where stop * E < |P| for every size (the difference a polynomial in the sizes with no negative coefficient,
not 0), the loop writes fewer elements than P has whatever it writes: that is reported without a query.
"""

from __future__ import annotations

from tilepy.symbolic import BinOp, Const, Var

from ..counterexample import dims_of
from ..report import Finding
from ..vc import AND, OR, SolverUnknown, cmp, subst, term_vars
from .global_race import _division_lemmas
from .instances import _grid_axes, _persistent_axis


def check(ctx) -> list:
    A = ctx.analysis
    by_param: dict = {}
    for acc in A.global_accesses:
        by_param.setdefault(acc.param, []).append(acc)
    out = []
    axes = None
    for accs in by_param.values():
        if len(accs) != 1 or accs[0].kind != "write":
            continue
        a = accs[0]
        if len(a.point.loops) != 1:
            continue
        lp = a.point.loops[0]
        ax = _persistent_axis(lp)
        if ax is None:
            continue
        if axes is None:
            axes = _grid_axes(A.kir)
        if axes != {ax}:
            continue
        f = _store(ctx, a, lp)
        if f is not None:
            out.append(f)
    return out


def _store(ctx, a, lp):
    coords = tuple(Var(f"cc{d}@1") for d in range(len(a.shape)))
    idx = a.indices(coords)
    if any(i is None for i in idx):
        return None
    t = Var("t@1")
    m = {lp.var.name: t}
    for name in lp.derived:  # per-iteration values (min / max / select) with their facts in the path
        m[name] = Var(name + "@1")
    path = subst(a.point.path, m)
    idx = tuple(subst(i, m) if not isinstance(i, int) else i for i in idx)
    stop = lp.stop
    # every name must be one the query pins down: the iteration, sizes, integer parameters and values
    # defined by their facts in the path (anything else could be chosen freely: a false finding)
    names = term_vars(path) | term_vars(stop) | set().union(*(term_vars(i) for i in idx if not isinstance(i, int)))
    allowed = {t.name} | {f"{n}@1" for n in lp.derived} | set(coords_names(coords))
    if any(not (n in allowed or n.startswith("dim:") or n.startswith("p:")) for n in names):
        return None
    E = 1
    for n in a.shape:
        E *= int(n)
    size = 1
    for d in a.dims:
        size = size * d
    # stop * E <= |P| for every size: a polynomial identity over the sizes (kept out of the query: nonlinear)
    spare = _poly(size - stop * E)
    if spare is None or any(c < 0 for c in spare.values()):
        return None
    if spare:  # fewer writes than elements wherever the sizes are >= 1 (at 1 each: the coefficients' sum)
        ones = {d.name[4:]: 1 for d in a.dims if isinstance(d, Var)}
        n_t = max(int(_at_ones(stop)), 0)
        total = int(_at_ones(size))
        cex = {"dims": ones, "detail": (f"the blocks run {lp.name} = 0 .. {n_t - 1} once each between them: {n_t} "
                                        f"tiles of {E} elements, at most {n_t * E} writes for the {total} "
                                        f"elements of '{a.param}' (and fewer than its elements for every size)")}
        msg = (f"coverage: some element of the output '{a.param}' is never written: the persistent loop runs "
               f"fewer tiles than the output has")
        return Finding("coverage", "error", msg, a.span, cex)
    outside = OR(*(OR(cmp("<", i, 0), cmp(">=", i, n)) for i, n in zip(idx, a.dims)))
    query = AND(cmp(">=", t, 0), cmp("<", t, stop), path,
                *(AND(cmp(">=", c, 0), cmp("<", c, n)) for c, n in zip(coords, a.shape)),
                *(AND(cmp(">=", d, 1), cmp("<=", d, BOUND)) for d in a.dims if not isinstance(d, int)), outside,
                *_division_lemmas((path, *idx)))
    if query is False:
        return None
    model = _bounded_check(ctx.solver, query)
    if model is None:
        return None
    dims = dims_of(model)
    ti = int(model.get("t@1", 0))
    where = tuple(int(ctx.eval(i, model)) for i in idx)
    n_t = int(ctx.eval(stop, model))
    total = int(ctx.eval(size, model))
    cex = {"iteration": {lp.name: ti}, "coords": tuple(int(model.get(c.name, 0)) for c in coords),
           "element": where, "dims": dims,
           "detail": (f"the blocks run {lp.name} = 0 .. {n_t - 1} once each between them ({n_t} tiles of {E} "
                      f"elements: at most {n_t * E} writes for the {total} elements of '{a.param}'), and at "
                      f"{lp.name} = {ti} the store's element {where} lies outside '{a.param}' (masked off), so "
                      f"at least one element of '{a.param}' is never written")}
    msg = (f"coverage: some element of the output '{a.param}' is never written: a tile of the persistent loop "
           f"lands outside it while the tiles are no more than its elements")
    return Finding("coverage", "error", msg, a.span, cex)


BOUND = 16  # sizes searched: 1 .. BOUND (a finding is a real one; a miss beyond it is possible)
RLIMIT = 5_000_000  # Z3 resource units for its query (deterministic, vc.py's solver budgets; ~2 s; its queries: 25k)


def _bounded_check(solver, query):
    """solver.check within RLIMIT Z3 resource units (an answer it does not settle is no finding)."""
    saved = solver.rlimit
    solver.rlimit = RLIMIT
    try:
        return solver.check(query)
    except SolverUnknown:
        return None
    finally:
        solver.rlimit = saved


def _at_ones(e):
    """A Sym of sizes evaluated with every size 1."""
    if isinstance(e, int):
        return e
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, Var):
        return 1
    a, b = _at_ones(e.a), _at_ones(e.b)
    return {"+": a + b, "-": a - b, "*": a * b}[e.op]


def coords_names(coords):
    return [c.name for c in coords]


def _poly(e):
    """{monomial (sorted variable names): coefficient} of a Sym built from sizes ("dim:" variables) and
    integers with + - *, or None."""
    if isinstance(e, int):
        return {(): e} if e else {}
    if isinstance(e, Const):
        return {(): int(e.value)} if int(e.value) else {}
    if isinstance(e, Var):
        return {(e.name,): 1} if e.name.startswith("dim:") else None
    if not isinstance(e, BinOp) or e.op not in ("+", "-", "*"):
        return None
    a, b = _poly(e.a), _poly(e.b)
    if a is None or b is None:
        return None
    out: dict = {}
    if e.op == "*":
        for ma, ca in a.items():
            for mb, cb in b.items():
                m = tuple(sorted(ma + mb))
                out[m] = out.get(m, 0) + ca * cb
    else:
        out = dict(a)
        for m, c in b.items():
            out[m] = out.get(m, 0) + (c if e.op == "+" else -c)
    return {m: c for m, c in out.items() if c}
