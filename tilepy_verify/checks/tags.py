"""Tag assertions: `tp.assert_tag(x, pred)` must hold for every element of x (and every loop iteration and
block); `tp.assert_tag(tp.mma_operands(acc), pred)` for every (a_tag, b_tag) pair multiplied into every
accumulator element by every MMA that produced acc. Each becomes one query per tag alternative: the
alternative's condition and the negated predicate. Register MMA operands whose layout differs from the
instruction's are read as the hardware would: element (i, kk) of the instruction's A is whatever the thread
holding position (i, kk) of the fragment has in that register. With `at=(tiles...)` the predicate also gets
each element's values of those index tiles; on a global tensor, `tp.assert_tag(T, lambda t, *coords: ...)`
holds for every element any store writes into T, at its coordinates in T."""

from __future__ import annotations

from tilepy.symbolic import Var

from ..counterexample import block_of, coord_ranges, dims_of, holder, instance, iteration_of, thread_fields
from ..events import UNKNOWN, MmaOps, Reg, TensorVal, intlike
from ..report import Finding
from ..tagterms import Alt, Unknown, has_top, predicate, product, show, subst_tag
from ..vc import AND, NOT, cmp, in_range, subst


def check(ctx) -> list:
    """Each assertion gives units of (query, finding maker): at most one finding per unit (an element
    assertion is one unit, an operand assertion one per MMA that produced acc, a tensor's one per store).
    The queries of the assertions of one source line (the stage copies of a ring's assertion,
    mbarrier_arrays.py) are asked together first (Solver_.none_of), one by one only when that has a model."""
    out = []
    reached = _reached(ctx)
    groups: dict = {}
    for a in ctx.analysis.assertions:
        empty = _meaningless(ctx, a, reached)
        if empty is not None:
            out.append(empty)
            continue
        units = (_mma(ctx, a) if isinstance(a.target, MmaOps) else _stores(ctx, a) if isinstance(a.target, TensorVal)
                 else _elements(ctx, a))
        groups.setdefault(a.span, []).extend(units)
    for units in groups.values():
        if ctx.solver.none_of([q for unit in units for q, _ in unit]):
            continue
        for unit in units:
            for q, make in unit:
                model = ctx.solver.check(q)
                if model is not None:
                    out.append(make(model))
                    break
    return out


def _reached(ctx) -> dict:
    """id(assertion) -> whether some block and iteration reaches it, for the element and operand assertions
    (asked together: one model usually reaches every stage copy of a ring's assertion). The stage copies of a
    ring's assertion (mbarrier_arrays.py) are first asked on the kernel as written (`_reached_as_written`)."""
    ours = [a for a in ctx.analysis.assertions if not isinstance(a.target, TensorVal)]
    out = _reached_as_written(ctx, ours)
    ours = [a for a in ours if id(a) not in out]
    if len(ours) > 1 and _all_reached(ctx, ours):
        return {**out, **{id(a): True for a in ours}}
    got = ctx.solver.satisfiable([instance(a.point, "@1")[1] for a in ours])
    return {**out, **{id(a): ok for a, ok in zip(ours, got)}}


def _reached_as_written(ctx, ours) -> dict:
    """id(assertion) -> True for the assertions of `ours` whose source line some block and iteration reaches in
    the kernel as written (ctx.as_written(): one assertion per source line instead of one per stage copy).

    The rewrite into stage copies keeps every statement, its order and its path condition (only the ring's
    index is split into round and stage), so the source line is reached as written iff some copy of it is
    reached; a copy that no iteration reaches (a stage beyond a short loop's trip count) has nothing to check,
    and the line's reached copies carry its proof. Only a line whose every as-written assertion is reached is
    answered here (a static_range's copies share a line); the rest, and every line where the walk or a query
    fails, are asked on the copies as before."""
    from ..vc import SolverUnknown

    if not ours:
        return {}
    written = ctx.as_written()
    if written is None:
        return {}
    by_line: dict = {}
    for a in written.analysis.assertions:
        if not isinstance(a.target, TensorVal):
            by_line.setdefault(a.span, []).append(a)
    spans = {a.span for a in ours if a.span in by_line}
    asked = [a for sp in spans for a in by_line[sp]]
    if not asked:
        return {}
    try:
        got = written.solver.satisfiable([instance(a.point, "@1")[1] for a in asked])
    except SolverUnknown:
        return {}
    ok = {sp for sp in spans if all(g for a, g in zip(asked, got) if a.span == sp)}
    return {id(a): True for a in ours if a.span in ok}


def _all_reached(ctx, ours) -> bool:
    """Whether one launch (sizes, block) reaches every assertion of `ours`, each in an iteration of its own
    (each instance renamed apart): one witness query for a ring's stage copies, which one by one need one
    nonlinear model search each. False says nothing (they are asked one by one)."""
    from ..vc import SolverUnknown

    try:
        return ctx.solver.witness(AND(*(instance(a.point, f"@r{i}")[1] for i, a in enumerate(ours)))) is not None
    except SolverUnknown:
        return False


def _meaningless(ctx, a, reached):
    """An assertion that would hold vacuously (no element or operand pair to check) is an error, never a
    proof: `mma_operands` of a value no `tp.mma` produced, a target the analysis does not model, or an
    assertion no block and iteration ever reaches."""
    what = hint = None
    if isinstance(a.target, MmaOps):
        if not isinstance(a.target.reg, Reg) or not a.target.reg.pairs:
            what = "its argument is not the result of a tp.mma, so there are no operand pairs to check"
            hint = ("pass the accumulator a tp.mma returned (acc = tp.mma(a, b, acc)); to check the elements of "
                    "a value, write tp.assert_tag(x, lambda t: ...)")
    elif isinstance(a.target, TensorVal):
        rank = len(a.target.type.shape)
        if a.at:
            what = "`at=` tiles apply to register tiles"
            hint = "a tensor's predicate gets the stored element's coordinates"
        elif len(a.fn.params) != 1 + rank:
            what = (f"an assertion on the {rank}-d tensor `{a.target.param}` takes the stored tag and {rank} "
                    f"coordinate(s); the predicate takes {len(a.fn.params)} parameter(s)")
            hint = "lambda t, " + ", ".join(f"i{d}" for d in range(rank)) + ": ..."
        elif not _stores_into(ctx, a.target.param):
            what = f"no tp.store writes the tensor `{a.target.param}`, so there is no stored element to check"
            hint = "assert on the tensor the kernel stores into, or on the register tile before the store"
    elif not isinstance(a.target, Reg):
        what = "its argument is not a register tile whose tags the verifier follows"
        hint = "assert on a register tile (tp.load the shared tile or view first)"
    if what is None and a.at and not isinstance(a.target, TensorVal):
        what, hint = _bad_at(a)
    if what is None and not isinstance(a.target, TensorVal):
        if not reached[id(a)]:  # reachable or not: no counterexample to shrink
            what = "no block and no loop iteration ever reaches it"
            hint = "move the assertion where the value is computed, or fix the loop bounds / condition around it"
    if what is None:
        return None
    return Finding("tag_assertion", "error", f"tag assertion `{a.fn.source}` cannot mean anything: {what}",
                   a.span, {"detail": what, "hint": hint})


def _bad_at(a):
    """(what, hint) when the `at=` tiles of an element assertion cannot give the predicate its arguments."""
    if isinstance(a.target, MmaOps):
        return ("`at=` tiles apply to element assertions, not to tp.mma_operands",
                "assert on the MMA's operands' elements instead, or drop at=")
    shape = tuple(a.target.type.shape)
    for k, x in enumerate(a.at):
        if not isinstance(x, Reg) and x is not UNKNOWN and intlike(x):
            continue  # a block-uniform integer: the same value for every element
        if not isinstance(x, Reg) or x.value is None:
            return (f"the values of `at` tile {k} are not known to the verifier",
                    "pass index tiles computed from tp.arange, tp.block_id, loop variables and constants "
                    "by + - * // %")
        xs = tuple(x.type.shape)
        probe = x.value(tuple(Var(f"c{d}@a") for d in range(len(xs))))
        if probe is UNKNOWN or not intlike(probe):
            return (f"the values of `at` tile {k} are not known to the verifier",
                    "pass index tiles computed from tp.arange, tp.block_id, loop variables and constants "
                    "by + - * // %")
        if len(xs) != len(shape) or any(p != q and 1 not in (p, q) for p, q in zip(xs, shape)):
            return (f"`at` tile {k} of shape {xs} does not broadcast with the asserted value's shape {shape}",
                    "give the index tiles the value's rank ([:, None] / [None, :])")
    return None, None


def _bshape(a):
    shape = list(a.target.type.shape)
    for x in a.at:
        if isinstance(x, Reg):
            shape = [max(p, q) for p, q in zip(shape, x.type.shape)]
    return tuple(shape)


def _at(reg, c, shape):
    """Coordinates of broadcast element c in `reg` (size-1 axes read element 0)."""
    return tuple(0 if n == 1 and m != 1 else x for x, n, m in zip(c, reg.type.shape, shape))


def _at_value(x, c, shape):
    return x.value(_at(x, c, shape)) if isinstance(x, Reg) else x


def _alts_pred(fn, alt_lists, extra=()):
    """[(cond, tags, violation term, src)] for every combination of alternatives; `extra` are further
    predicate arguments (the values of `at=` tiles)."""
    res = []
    for combo in product(alt_lists, tuple):
        try:
            if any(has_top(t) for t in combo.tag):
                raise Unknown()
            bad = NOT(predicate(fn, tuple(combo.tag) + tuple(extra)))
        except Unknown:
            bad = True
        res.append((combo.cond, combo.tag, bad, combo.src))
    return res


def _elements(ctx, a):
    reg = a.target
    shape = _bshape(a) if a.at else reg.type.shape
    coords = tuple(Var(f"c{d}@a") for d in range(len(shape)))
    alts = reg.tag(_at(reg, coords, shape)) if reg.tag is not None else [Alt(True, None)]
    extra = tuple(_at_value(x, coords, shape) for x in a.at)
    m, pc = instance(a.point, "@1")

    def make(model, tags, src):
        env = dict(model)
        tag = show(subst_tag(tags[0], m), env)
        cs = tuple(env.get(f"c{d}@a", 0) for d in range(len(shape)))
        slot = holder(reg.type.layout, _at(reg, cs, shape))
        cex = {"block": block_of(model), "iteration": iteration_of(a.point, model, "@1"), "coords": cs,
               "tags": {"x": tag}, "dims": dims_of(model)}
        if a.at:
            cex["at"] = tuple(show(subst_tag(v, m), env) for v in extra)
        if slot is not None:
            cex.update(thread_fields(slot[0], ctx.analysis.target.warp_size))
            cex["value"] = slot[1]
        unknown = has_top(tags[0])
        where = f" ({', '.join(f'{p}={v}' for p, v in zip(a.fn.params[1:], cex['at']))})" if a.at else ""
        msg = (f"tag assertion `{a.fn.source}` fails for element {cs}{where}: tag {tag!r}" if not unknown else
               f"tag assertion `{a.fn.source}` cannot be proved for element {cs}: its tag is not known "
               "(untracked through a loop or uninitialized shared memory)")
        return Finding("tag_assertion", "error", msg, a.span, cex, src or reg.src)

    return [[(AND(pc, coord_ranges(coords, shape), subst(cond, m), subst(bad, m)),
              lambda model, tags=tags, src=src: make(model, tags, src))
             for cond, tags, bad, src in _alts_pred(a.fn, [alts], extra)]]


def _operand_alts(op_tag, which, instr, warps, shape, pos, group, suffix):
    """Alternatives of the tag of the element the instruction uses at position `pos` of operand `which`."""
    if op_tag.actual is None or op_tag.expected is None or _same(op_tag.actual, op_tag.expected):
        return op_tag.tag(pos), True
    t, v = Var(f"t{which}{suffix}"), Var(f"v{which}{suffix}")
    exp, act = op_tag.expected, op_tag.actual
    where = AND(in_range(t, 0, exp.num_threads), in_range(v, 0, exp.num_values),
                cmp("==", t // instr.threads, group),
                *(cmp("==", x, p) for x, p in zip(exp.coord(t, v), pos)))
    held = tuple(act.coord(t, v))
    return [Alt(AND(where, x.cond), x.tag, x.src) for x in op_tag.tag(held)], False


def _same(a, b) -> bool:
    import numpy as np

    if (a.num_threads, a.num_values, tuple(a.tile)) != (b.num_threads, b.num_values, tuple(b.tile)):
        return False
    return all(np.array_equal(x, y) for x, y in zip(a.coords, b.coords))


def _mma(ctx, a):
    reg = a.target.reg
    units = []
    for contrib in reg.pairs:
        M, N, K = contrib.shape
        instr, warps = contrib.instr, contrib.warps
        i, j, kk = Var("i@m"), Var("j@m"), Var("kk@m")
        group = (i // instr.m) % warps[0] + warps[0] * ((j // instr.n) % warps[1])
        alts_a, _ = _operand_alts(contrib.a, "a", instr, warps, (M, K), (i, kk), group, "@m")
        alts_b, _ = _operand_alts(contrib.b, "b", instr, warps, (K, N), (kk, j), group, "@m")
        m, pc = instance(contrib.point, "@1")
        ranges = AND(in_range(i, 0, M), in_range(j, 0, N), in_range(kk, 0, K))

        def make(model, tags, src, contrib=contrib, m=m):
            env = dict(model)
            ta, tb = (show(subst_tag(t, m), env) for t in tags)
            ci, cj, ck = env.get("i@m", 0), env.get("j@m", 0), env.get("kk@m", 0)
            slot = holder(reg.type.layout, (ci, cj))
            cex = {"block": block_of(model), "iteration": iteration_of(contrib.point, model, "@1"),
                   "coords": (ci, cj), "k_index": ck, "tags": {"a": ta, "b": tb}, "dims": dims_of(model)}
            if slot is not None:
                cex.update(thread_fields(slot[0], ctx.analysis.target.warp_size))
                cex["value"] = slot[1]
            unknown = has_top(tags[0]) or has_top(tags[1])
            where = f"{contrib.span.file.rsplit('/', 1)[-1]}:{contrib.span.line}"
            msg = (f"tag assertion `{a.fn.source}` fails for accumulator element ({ci}, {cj}): the MMA at "
                   f"{where} multiplies A tag {ta!r} with B tag {tb!r}"
                   if not unknown else
                   f"tag assertion `{a.fn.source}` cannot be proved for accumulator element ({ci}, {cj}): an operand "
                   "tag is not known (uninitialized shared memory or untracked data flow)")
            return Finding("tag_assertion", "error", msg, a.span, cex, src or contrib.span)

        units.append([(AND(pc, ranges, subst(cond, m), subst(bad, m)),
                       lambda model, tags=tags, src=src, make=make: make(model, tags, src))
                      for cond, tags, bad, src in _alts_pred(a.fn, [alts_a, alts_b])])
    return units


def _stores_into(ctx, param) -> list:
    """[(GAccess, stored value)] of the stores into global tensor `param`."""
    A = ctx.analysis
    return [(g, A.store_values[id(g)]) for g in A.global_accesses
            if g.kind == "write" and g.param == param and id(g) in A.store_values]


def _stores(ctx, a):
    """`tp.assert_tag(T, lambda t, *idx: ...)` on a global tensor: for every store into T (anywhere in the
    kernel), every stored element inside T and its mask, pred(the stored value's tag, its coordinates in T)."""
    units = []
    for g, val in _stores_into(ctx, a.target.param):
        shape = tuple(g.shape)
        coords = tuple(Var(f"c{d}@s") for d in range(len(shape)))
        idx = g.indices(coords)
        m, pc = instance(g.point, "@1")
        if any(x is None for x in idx) or not isinstance(val, Reg):
            tagged = [(True, None, True, None)]
            unknown_index = True
        else:
            vs = tuple(val.type.shape)
            cc = tuple(0 if n == 1 and k != 1 else c for c, n, k in zip(coords, vs, shape))
            alts = val.tag(cc) if val.tag is not None else [Alt(True, None)]
            tagged = _alts_pred(a.fn, [alts], tuple(idx))
            unknown_index = False
        inside = AND(*(AND(cmp(">=", x, 0), cmp("<", x, d)) for x, d in zip(idx, g.dims) if x is not None))

        def make(model, tags, g=g, val=val, shape=shape, idx=idx, m=m, unknown_index=unknown_index):
            env = dict(model)
            cs = tuple(env.get(f"c{d}@s", 0) for d in range(len(shape)))
            at = tuple(show(subst_tag(x, m), env) for x in idx) if not unknown_index else None
            tag = show(subst_tag(tags[0], m), env) if tags is not None else None
            cex = {"block": block_of(model), "iteration": iteration_of(g.point, model, "@1"), "coords": cs,
                   "index": at, "tags": {"stored": tag}, "dims": dims_of(model)}
            slot = holder(val.type.layout, cs) if isinstance(val, Reg) and len(val.type.shape) == len(cs) else None
            if slot is not None:
                cex.update(thread_fields(slot[0], ctx.analysis.target.warp_size))
                cex["value"] = slot[1]
            where = f"{g.span.file.rsplit('/', 1)[-1]}:{g.span.line}"
            if unknown_index:
                msg = (f"tag assertion `{a.fn.source}` on `{a.target.param}` cannot be proved for the store at "
                       f"{where}: the stored elements' coordinates or tags are not known")
            elif has_top(tags[0]):
                msg = (f"tag assertion `{a.fn.source}` on `{a.target.param}` cannot be proved for element {at} stored "
                       f"at {where}: its tag is not known (untracked through a loop, a gather by data, or memory)")
            else:
                msg = (f"tag assertion `{a.fn.source}` fails for element {at} of `{a.target.param}` stored at {where}: "
                       f"tag {tag!r}")
            return Finding("tag_assertion", "error", msg, a.span, cex, g.span)

        units.append([(AND(pc, coord_ranges(coords, shape), subst(AND(inside, g.mask(coords), cond, bad), m)),
                       lambda model, tags=tags, make=make: make(model, tags))
                      for cond, tags, bad, _src in tagged])
    return units
