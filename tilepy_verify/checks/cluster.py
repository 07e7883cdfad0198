"""Thread-block clusters: what the per-block analysis cannot see, checked on the kernel's structure.

The walk (domain.py) analyses one block of the cluster and relies on the blocks being alike (one kernel): a
multicast copy (`copy_bulk(..., multicast=mask, by=r)`), which every block of the mask executes, is to each
block a bulk copy into its own stage tied to its own mbarrier, and a remote arrival `mbarrier_arrive(bar,
cta=r)` is, summed over the blocks that send it, an arrival on the block's own `bar` (the consumers of every
block arrive on the same mbarrier of each block of the mask). That symmetry holds only when each block's
releases reach every block whose multicasts write into it; this module checks that, and the cluster barriers:

* a multicast copy into a ring stage, guarded by the producer's wait on `empty`, needs the consumers' arrivals on
  `empty` to reach every rank of the mask (`cta=r` for each r, e.g. a `tp.static_range` over the cluster).
  A rank that no block releases to: its producer waits for releases that never come (`deadlock`). A rank that
  some blocks release to but not all (its `empty` completes on those, e.g. local releases only): it refills a stage
  that a block it multicasts into may still be reading (`pipeline_hazard`).
* remote arrivals and multicast copies must come after a `tp.cluster_sync()` (the other blocks' mbarriers are
  initialized before it; a relaxed one suffices: every init is fenced at cluster scope), and the kernel must end
  with one after the last of them (a block must not exit while others still write its shared memory), unless each
  block waits for all of them itself before it exits (the producer tail: `remote_writes_awaited`): `race`
  otherwise.
* `tp.store_remote(dst, value, bar, cta)` is, to the walk, a store into the block's own `dst` completing its own
  `bar`: its targets must be a permutation of the ranks, a cluster barrier (relaxed or not) must come before the
  first, and a wait on `bar` after each in the same line (then no closing barrier is needed); an access of `dst`
  that can come before the other block's push into it must be ordered by a signal (`_receive_tile_order`).
* a load of another block's shared tile (`tp.load(..., cta=r)`, distributed shared memory) is, to the walk, a load
  of the block's own tile; it must come after a `tp.cluster_sync()` (the other block wrote the tile before it) and
  the kernel must have one after it (the other block must not exit while its tile is read): `race` otherwise. A
  relaxed barrier (`relaxed=True`, no release / acquire) counts for neither rule but the last, and there only once
  each loaded value has been stored before it.
* a multicast copy writes the tile the issuing block reads into every block of the mask, which the walk reads as each
  block's copy of its own source: so the source must be the same tile in every block of the cluster. Its coordinates
  may not depend on `tp.block_id(d)` for an axis d the cluster spans, nor on `tp.cluster_rank()` (followed through
  every assignment of a variable and the bounds of the loops whose counters it uses): `race` otherwise (e.g. A's
  rows multicast over a cluster of row tiles, where each block needs its own rows).
A `cta=` is evaluated per rank (constants, `tp.static_range` variables, `tp.cluster_rank()` and + - * // % ^ & | of
them); one that is something else is not judged here.
"""

from __future__ import annotations

from tilepy import ir

from ..report import Finding


def _bar_base(e):
    if isinstance(e, ir.Call) and e.op == "mbarrier_at":
        e = e.args[0]
    return e.name if isinstance(e, ir.Var) else None


def _remote_loads(stmts, out, path):
    """(statement, index path) of every statement that loads another block's shared tile (`tp.load(..., cta=r)`)."""
    for i, s in enumerate(stmts):
        here = (*path, i)
        if isinstance(s, ir.Assign | ir.Eval):
            e = s.value if isinstance(s, ir.Assign) else s.call
            if any(isinstance(x, ir.Call) and x.op == "load" and x.attrs.get("cta") is not None
                   for x in ir.walk_exprs(e)):
                out.append((s, here))
        elif isinstance(s, ir.For):
            _remote_loads(s.body, out, here)
        elif isinstance(s, ir.If):
            _remote_loads(s.then, out, (*here, "then"))
            _remote_loads(s.orelse, out, (*here, "else"))


def _used_before(stmt, path, sync, evals) -> bool:
    """Whether the value a remote load assigns is stored (a store of an expression that mentions it) after the load
    and before the relaxed cluster barrier at `sync`: the load has then returned (the store needs its value), so
    the barrier's relaxed arrival cannot let the other block exit while it reads."""
    if not isinstance(stmt, ir.Assign):
        return False
    return any(s.call.op in ("store", "store_bulk") and path < p < sync
               and any(_uses(a, stmt.name, 0) for a in s.call.args if isinstance(a, ir.Expr))
               for s, _, p in evals)


def _uses(e, name, depth) -> bool:
    """Whether expression `e` reads variable `name`, directly or through variables assigned once."""
    for x in ir.walk_exprs(e):
        if isinstance(x, ir.Var) and (x.name == name or (
                depth < 8 and x.name in _DEFS and _uses(_DEFS[x.name], name, depth + 1))):
            return True
    return False


def _walk(stmts, env, out, path):
    """(statement, static loop bindings, index path) of every Eval, in program order."""
    for i, s in enumerate(stmts):
        here = (*path, i)
        if isinstance(s, ir.Eval):
            out.append((s, env, here))
        elif isinstance(s, ir.For):
            sub = env
            if s.kind == "static" and all(isinstance(x, ir.Const) or x is None or isinstance(x, int)
                                          for x in (s.start, s.stop, s.step)):
                def v(x, d):
                    return d if x is None else x.value if isinstance(x, ir.Const) else x
                sub = {**env, s.var: range(v(s.start, 0), v(s.stop, 0), v(s.step, 1))}
            _walk(s.body, sub, out, here)
        elif isinstance(s, ir.If):
            _walk(s.then, env, out, (*here, "then"))
            _walk(s.orelse, env, out, (*here, "else"))


_DEFS: dict = {}  # variables assigned once in the kernel being checked: name -> expression (see findings)
_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "//": lambda a, b: a // b,
        "%": lambda a, b: a % b, "^": lambda a, b: a ^ b, "&": lambda a, b: a & b, "|": lambda a, b: a | b}


def _value(e, binding: dict, rank: int):
    """The integer value of a `cta=` expression in the block of cluster rank `rank`, with the static loop
    variables bound; None where it is not a function of those (then the releases are not judged)."""
    if isinstance(e, ir.Const) and isinstance(e.value, int):
        return e.value
    if isinstance(e, ir.Var):
        if e.name in binding:
            return binding[e.name]
        d = _DEFS.get(e.name)
        return None if d is None else _value(d, binding, rank)
    if isinstance(e, ir.Call) and e.op == "cluster_rank":
        return rank
    if isinstance(e, ir.BinOp) and e.op in _OPS:
        a, b = _value(e.lhs, binding, rank), _value(e.rhs, binding, rank)
        if a is None or b is None or (e.op in ("//", "%") and b == 0):
            return None
        return _OPS[e.op](a, b)
    return None


def _targets(e, env: dict, rank: int):
    """The ranks an arrival `cta=e` of the block of rank `rank` reaches over its static loops, or None."""
    names = [n for n in env if _mentions(e, n)]
    out = set()
    for combo in _product([list(env[n]) for n in names]):
        v = _value(e, dict(zip(names, combo)), rank)
        if v is None:
            return None
        out.add(v)
    return out


def _mentions(e, name) -> bool:
    if isinstance(e, ir.Var):
        return e.name == name or (e.name in _DEFS and _mentions(_DEFS[e.name], name))
    if isinstance(e, ir.BinOp):
        return _mentions(e.lhs, name) or _mentions(e.rhs, name)
    return False


def _product(lists):
    if not lists:
        yield ()
        return
    for x in lists[0]:
        for rest in _product(lists[1:]):
            yield (x, *rest)


def _remote_stores(kir, evals, syncs) -> list:
    """tp.store_remote(dst, value, bar, cta): the walk reads it as a store into the block's own `dst` completing its
    own `bar`, which holds when the blocks' targets are a permutation of the cluster's ranks (each block receives
    the stores it makes, e.g. cta=tp.cluster_rank() ^ 1). Around it: a cluster barrier before the first (the other
    block's mbarrier initialized: tp.mbarrier's initialization is fenced at cluster scope, so a relaxed barrier
    publishes it), and, after each, a wait on its mbarrier in the same line (the block then has received the store
    its partner sent, so the partner no longer writes it; and the partner stays until it has received this one):
    no closing barrier is needed."""
    out = []
    pushes = [(s, env, p) for s, env, p in evals if s.call.op == "store_remote"]
    if not pushes:
        return out
    size = 1
    for d in kir.cluster:
        size *= d
    if not any(p < pushes[0][2] for p in syncs):
        out.append(Finding(
            "race", "error", "tp.store_remote can reach another block of the cluster before it initialized its "
            "mbarrier: no tp.cluster_sync() comes before it", pushes[0][0].span,
            {"detail": "call tp.cluster_sync(relaxed=True) after the tp.mbarrier() allocations, where every thread "
                       "runs"}))
    for s, env, p in pushes:
        bar = _bar_base(s.call.args[2])
        targets = [_targets(s.call.args[3], env, r) for r in range(size)]
        if any(t is None or len(t) != 1 for t in targets) or sorted(next(iter(t)) for t in targets) != \
                list(range(size)):
            out.append(Finding(
                "race", "error", "tp.store_remote whose target ranks are not a permutation of the cluster's (or are "
                "not a function of tp.cluster_rank() this check can evaluate): a block would receive more or fewer "
                "stores than it makes, which the analysis of one block cannot follow", s.span,
                {"detail": "exchange between partners, e.g. cta=tp.cluster_rank() ^ 1"}))
        if not any(s2.call.op == "mbarrier_wait" and p2 > p and p2[:-1] == p[:len(p2) - 1]
                   and _bar_base(s2.call.args[0]) == bar for s2, _, p2 in evals):
            out.append(Finding(
                "race", "error", f"no wait on '{bar}' after this tp.store_remote in the same role: the block can exit "
                "while its partner's store into it is still in flight", s.span,
                {"detail": f"wait on '{bar}' (tp.mbarrier_wait) after the store, then read the tile"}))
    out += _receive_tile_order(kir)
    return out


def _events(stmts, env, out, key, role, dyn):
    """(statement, static bindings, key, role key, run-time loops) of every Assign / Eval in program order, static
    loops of constant bounds unrolled (the key holds the iteration); `role`: the key up to the innermost branch of a
    role `if` (threads of one role run its statements in key order); `dyn`: the keys of the run-time loops around."""
    for i, s in enumerate(stmts):
        here = (*key, i)
        if isinstance(s, ir.Assign | ir.Eval):
            out.append((s, env, here, role, dyn))
        elif isinstance(s, ir.For):
            if s.kind == "static" and all(isinstance(x, ir.Const) or x is None for x in (s.start, s.stop, s.step)):
                for it in range(*(d if x is None else x.value for x, d in ((s.start, 0), (s.stop, 0), (s.step, 1)))):
                    _events(s.body, {**env, s.var: range(it, it + 1)}, out, (*here, it), role, dyn)
            else:
                _events(s.body, env, out, (*here, -1), role, (*dyn, here))
        elif isinstance(s, ir.If):
            for name, body in (("then", s.then), ("else", s.orelse)):
                k = (*here, name)
                _events(body, env, out, k, k if s.kind == "role" else role, dyn)


def _tile_of(e, env):
    """(tile name, element or None) of a shared tile argument: `t` or `t[i]` with i a static value."""
    if isinstance(e, ir.Var):
        return e.name, None
    if isinstance(e, ir.Call) and e.op == "stage" and e.args and isinstance(e.args[0], ir.Var):
        idx = e.args[1] if len(e.args) > 1 and isinstance(e.args[1], ir.Expr) else None
        binding = {n: r.start for n, r in env.items()}
        return e.args[0].name, None if idx is None else _value(idx, binding, 0)
    return None, None


def _receive_tile_order(kir) -> list:
    """A tile that receives `tp.store_remote` and that the block also accesses BEFORE the push (program order, or
    in a role running beside it): the walk reads the push as the block's own write at the push, but the write into
    this block's tile comes from the other block, whose progress is not this block's program order. Under the
    ranks' symmetry (a permutation of pushes, checked above) the other block's push P into this block follows this
    block's access R of the tile when, before P, the pushing role waits (phase 0) on an mbarrier X (count 1) whose
    only arrival is a `tp.store_remote` S (outside run-time loops) that this block makes after R:
    - R in the pushing role: S's value is computed from R's result (every thread's read feeds the pushed values,
      so no byte of S leaves before the reads have returned, and X completes only on all of them), S in a block
      enclosing R; or a block barrier (tp.barrier()) orders R before such a read;
    - R in another role: that role arrives on an mbarrier Y after R, and the pushing role waits on Y (phase 0, Y
      of count 1 with that one arrive op) before S.
    Elements of a staged tile that static loops name apart (recv[i]) are told apart. Anything else touching the
    receive tile before its push is an error: not proved (docs/verification.md, "Known soundness gap")."""
    evs: list = []
    _events(kir.body, {}, evs, (), (), ())
    counts, pushes_on, arrives_on = {}, {}, {}
    for s in ir.walk(kir.body):
        if isinstance(s, ir.Assign) and isinstance(s.value, ir.Call) and s.value.op == "mbarrier":
            counts[s.name] = (s.value.attrs.get("count", 1), s.value.attrs.get("stages"))
    for ev in evs:
        c = ev[0].call if isinstance(ev[0], ir.Eval) else None
        if c is not None and c.op == "store_remote":
            pushes_on.setdefault(_bar_base(c.args[2]), []).append(ev)
        if c is not None and c.op == "mbarrier_arrive":
            arrives_on.setdefault(_bar_base(c.args[0]), []).append(ev)
    out = []

    def inside(key, ctx):
        return key[:len(ctx)] == ctx

    def waits_before(role, bar, upto):
        return [ev for ev in evs if isinstance(ev[0], ir.Eval) and ev[0].call.op == "mbarrier_wait"
                and _bar_base(ev[0].call.args[0]) == bar and ev[3] == role and inside(upto, ev[2][:-1])
                and ev[2] < upto and not ev[4] and isinstance(ev[0].call.args[1], ir.Const)
                and ev[0].call.args[1].value == 0]

    def one_shot(bar, ops):
        c = counts.get(bar)
        return c is not None and c[0] == 1 and not c[1] and len(ops) == 1 and not ops[0][4]

    def signal_after(se, re_, pe) -> bool:
        """S (`se`, a push on mbarrier X) after R (`re_`) by R's threads, computed from R's result (the name not
        reassigned in between), X one-shot and waited for (phase 0) by the pushing role before P (`pe`)."""
        ss, _, skey, srole, sdyn = se
        rs, x = re_[0], _bar_base(ss.call.args[2])
        if sdyn or srole != re_[3] or not inside(re_[2], skey[:-1]) or not skey > re_[2] or skey > pe[2]:
            return False
        if not isinstance(rs, ir.Assign) or not _uses(ss.call.args[1], rs.name, 0):
            return False
        if any(isinstance(o[0], ir.Assign) and o[0].name == rs.name and re_[2] < o[2] < skey for o in evs):
            return False
        if not one_shot(x, [se]) or arrives_on.get(x):
            return False
        return any(w[2] > skey for w in waits_before(pe[3], x, pe[2]))

    def other_role_ordered(re_, pe) -> bool:
        """R in a role beside the pushing one: its role arrives on Y after R, the pushing role waits on Y (phase 0)
        before a push S on X that it waits for (phase 0) before P."""
        for y, arr in arrives_on.items():
            a = arr[0]
            if not one_shot(y, arr) or a[3] != re_[3] or not inside(re_[2], a[2][:-1]) or not a[2] > re_[2]:
                continue
            for wy in waits_before(pe[3], y, pe[2]):
                for bar, sl in pushes_on.items():
                    for se in sl:
                        _, _, skey, srole, sdyn = se
                        if se is pe or sdyn or srole != pe[3] or not skey > wy[2] or not inside(skey, wy[2][:-1]):
                            continue
                        if bar == _bar_base(pe[0].call.args[2]) or not one_shot(bar, [se]) or arrives_on.get(bar):
                            continue
                        if any(w[2] > skey for w in waits_before(pe[3], bar, pe[2])):
                            return True
        return False

    for pe in [ev for evl in pushes_on.values() for ev in evl]:
        ps, penv, pkey, prole, pdyn = pe
        dst, delem = _tile_of(ps.call.args[0], penv)
        if dst is None:
            continue
        for re_ in evs:
            rs, renv, rkey, rrole, rdyn = re_
            if re_ is pe:
                continue
            c = rs.call if isinstance(rs, ir.Eval) else None
            if c is not None and c.op == "store_remote":
                continue                                    # another push: a remote write, judged as P is
            e = rs.value if isinstance(rs, ir.Assign) else rs.call
            hits = [_tile_of(a, renv) for x in ir.walk_exprs(e) if isinstance(x, ir.Call) and x.op != "stage"
                    for a in x.args if isinstance(a, ir.Var) or (isinstance(a, ir.Call) and a.op == "stage")]
            if not any(t == dst and (el is None or delem is None or el == delem) for t, el in hits):
                continue
            same_role = rrole == prole
            loop_shared = any(inside(rkey, d) for d in pdyn)
            if same_role and rkey > pkey and not loop_shared:
                continue                                    # after the push: the wait on its bar orders it
            if loop_shared:
                ok = False                                  # a later iteration's push after this access
            elif same_role:
                # R itself feeds a signal, or a block barrier orders it before a read R2 that does
                later = [re_] + [r2 for r2 in evs if r2[3] == rrole and r2[2] > rkey and r2[2] < pkey
                                 and isinstance(r2[0], ir.Assign) and any(
                                     isinstance(b[0], ir.Eval) and b[0].call.op == "barrier" and b[3] == rrole
                                     and rkey < b[2] < r2[2] and inside(rkey, b[2][:-1]) and inside(r2[2], b[2][:-1])
                                     for b in evs)]
                ok = any(signal_after(se, r2, pe) for r2 in later for bar, sl in pushes_on.items() for se in sl
                         if se is not pe and bar != _bar_base(ps.call.args[2]))
            else:
                ok = other_role_ordered(re_, pe)
            if not ok:
                out.append(Finding(
                    "race", "error", f"'{dst}' receives the other block's tp.store_remote (line {ps.span.line}), "
                    "but this access can come before that write: no signal this block sends after the access is "
                    "waited for by the pushing role before the push (the other block's push is not ordered by "
                    "this block's program order)", rs.span,
                    {"detail": "after the last access, push a value computed from it into the other block "
                               "(tp.store_remote on its own mbarrier) and wait on that mbarrier (phase 0) before "
                               f"pushing into '{dst}'", "push_line": ps.span.line}))
                break
    return out


def _rank_dependent(e, kir, assigned, loops, seen) -> str | None:
    """What makes expression `e` differ between the blocks of one cluster: 'tp.block_id(d)' for an axis d the
    cluster spans, 'tp.cluster_rank()', through every assignment of the variables it reads and the bounds of the
    loops whose counters it reads; None where nothing does."""
    for x in ir.walk_exprs(e):
        if isinstance(x, ir.Call) and x.op == "block_id" and kir.cluster[x.attrs.get("axis", 0)] > 1:
            return f"tp.block_id({x.attrs.get('axis', 0)})"
        if isinstance(x, ir.Call) and x.op == "cluster_rank":
            return "tp.cluster_rank()"
        if isinstance(x, ir.Var) and x.name not in seen:
            seen.add(x.name)
            for v in assigned.get(x.name, []) + [b for lp in loops.get(x.name, [])
                                                   for b in (lp.start, lp.stop, lp.step) if isinstance(b, ir.Expr)]:
                why = _rank_dependent(v, kir, assigned, loops, seen)
                if why is not None:
                    return why
    return None


def _multicast_sources(kir, evals, assigned) -> list:
    """A multicast copy's source must be one tile for every block of the cluster (module docstring)."""
    loops: dict = {}
    for s in ir.walk(kir.body):
        if isinstance(s, ir.For):
            loops.setdefault(s.var, []).append(s)
    out = []
    for s, _env, _p in evals:
        if s.call.op != "copy_bulk" or "multicast" not in s.call.attrs:
            continue
        src = s.call.args[0]
        coords = src.args[1:] if isinstance(src, ir.Call) and src.op == "view" else (src,)
        why = next((w for c in coords if isinstance(c, ir.Expr)
                    for w in [_rank_dependent(c, kir, assigned, loops, set())] if w is not None), None)
        if why is not None:
            out.append(Finding(
                "race", "error", f"multicast copy of a source tile that differs between the blocks of the cluster "
                f"(its coordinates depend on {why}): every block of the mask receives the tile of the block that "
                "issues it, not its own", s.span,
                {"detail": "multicast only an operand tile the blocks of the cluster share (e.g. B's tile over a "
                           "cluster of row tiles, A's over a cluster of column tiles); load the others per block"}))
    return out


def findings(kir, awaited=None) -> list:
    """`awaited`: callable(kir) -> bool, True where every remote arrival into a block and every multicast copy into
    it is waited for by the block itself (the producer tail that replaces the closing cluster barrier:
    `remote_writes_awaited`); then no closing barrier is needed for them."""
    if getattr(kir, "cluster", (1, 1, 1)) == (1, 1, 1):
        return []
    evals: list = []
    _walk(kir.body, {}, evals, ())
    assigned: dict = {}
    for s in ir.walk(kir.body):
        if isinstance(s, ir.Assign):
            assigned.setdefault(s.name, []).append(s.value)
    _DEFS.clear()
    _DEFS.update({n: v[0] for n, v in assigned.items() if len(v) == 1})
    out = []
    counts = {}
    for s in ir.walk(kir.body):
        if isinstance(s, ir.Assign) and isinstance(s.value, ir.Call) and s.value.op == "mbarrier":
            counts[s.name] = s.value.attrs.get("count", 1)
    remote = [(s, env, p) for s, env, p in evals
              if (s.call.op == "mbarrier_arrive" and len(s.call.args) > 1)
              or (s.call.op == "copy_bulk" and "multicast" in s.call.attrs)]
    # (a relaxed cluster barrier orders no memory but the mbarrier initializations: tp.mbarrier's is fenced at
    # cluster scope, fence.mbarrier_init.release.cluster, which barrier.cluster.arrive.relaxed + wait publishes
    # (CUTLASS's cluster_arrive_relaxed / cluster_wait after its pipelines' init); not another block's writes; it
    # may close the kernel after remote loads whose values are used before it, below)
    syncs = [p for s, _, p in evals if s.call.op == "cluster_sync" and len(p) == 1 and not s.call.attrs.get("relaxed")]
    relaxed = [p for s, _, p in evals if s.call.op == "cluster_sync" and len(p) == 1 and s.call.attrs.get("relaxed")]
    if remote:
        first, last = remote[0], remote[-1]
        if not any(p < first[2] for p in syncs + relaxed):
            out.append(Finding(
                "race", "error", "a remote arrival or multicast copy can reach another block of the cluster before "
                "it initialized its mbarriers: no tp.cluster_sync() comes before it", first[0].span,
                {"detail": "call tp.cluster_sync() after the tp.mbarrier() allocations, where every thread runs"}))
        if not any(p > last[2] for p in syncs) and not (awaited is not None and awaited(kir)):
            out.append(Finding(
                "race", "error", "a block can exit while another block of the cluster still arrives on its mbarriers "
                "or multicasts into its shared memory: no tp.cluster_sync() comes after this", last[0].span,
                {"detail": "end the kernel with tp.cluster_sync(), after the role branches join"}))
    # a load of another block's shared tile (cta=): the blocks are alike, so the analyses read it as the block's
    # own tile, written before a cluster barrier (which orders the other block's writes too: barrier.cluster's
    # release / acquire); here: that barrier comes before the load, and another after it (the other block must not
    # exit, its shared memory gone, while this one reads it)
    loads: list = []
    _remote_loads(kir.body, loads, ())
    if loads:
        first, last = loads[0], loads[-1]
        if not any(p < first[1] for p in syncs):
            out.append(Finding(
                "race", "error", "a load of another block's shared tile (cta=) with no tp.cluster_sync() before it: "
                "it can read the tile before that block wrote it", first[0].span,
                {"detail": "write the tile, then tp.cluster_sync() where every thread runs, then load it"}))
        closing = any(p > last[1] for p in syncs) or any(
            p > last[1] and all(_used_before(ld, path, p, evals) for ld, path in loads) for p in relaxed)
        if not closing:
            out.append(Finding(
                "race", "error", "a block can exit while another block of the cluster still reads its shared memory "
                "(a load with cta=): no tp.cluster_sync() comes after this (a relaxed one only after the loaded "
                "values are stored)", last[0].span,
                {"detail": "end the kernel with tp.cluster_sync(), after the role branches join"}))
    out += _remote_stores(kir, evals, syncs + relaxed)
    out += _multicast_sources(kir, evals, assigned)
    for i, (s, _env, p) in enumerate(evals):
        c = s.call
        if c.op != "copy_bulk" or "multicast" not in c.attrs:
            continue
        mask = int(c.attrs["multicast"])
        need = {r for r in range(mask.bit_length()) if (mask >> r) & 1}
        # the guard: the closest wait before the copy in the same branch (the producer's wait on `empty`)
        guard = None
        for s2, _, p2 in reversed(evals[:i]):
            if s2.call.op == "mbarrier_wait" and p2[:-1] == p[:len(p2) - 1] and _bar_base(s2.call.args[0]) != \
                    _bar_base(c.args[2]):
                guard = _bar_base(s2.call.args[0])
                break
        if guard is None:
            out.append(Finding(
                "pipeline_hazard", "error", f"multicast copy (ranks {sorted(need)}) with no wait before it for the "
                "stage's release: it can overwrite a stage another block of the cluster is still reading", s.span,
                {"detail": "wait on the ring's `empty` mbarrier (released by the consumers of every block of the mask) "
                           "before the copy"}))
            continue
        # which (sender, receiver) pairs of the mask some release covers: the blocks are alike, so the block of
        # rank r0 runs every arrival with cluster_rank() = r0
        covered, judged = set(), True
        for s2, env2, _ in evals:
            if s2.call.op != "mbarrier_arrive" or _bar_base(s2.call.args[0]) != guard:
                continue
            for r0 in need:
                if len(s2.call.args) == 1:
                    covered.add((r0, r0))    # a local arrival reaches the block itself only
                    continue
                t = _targets(s2.call.args[1], env2, r0)
                if t is None:
                    judged = False
                else:
                    covered |= {(r0, c) for c in t}
        pairs = sorted((r0, c) for c in need for r0 in need if (r0, c) not in covered)
        if not judged or not pairs:
            continue
        count = counts.get(guard, 1)
        unreached = sorted(c for c in need if not any((r0, c) in covered for r0 in need))
        if unreached:
            c = unreached[0]
            out.append(Finding(
                "deadlock", "error", f"deadlock: the block of cluster rank {c} waits on '{guard}' ({count} arrival(s) "
                "per phase) before each multicast, but no block's consumers release to it (a missing remote release)",
                s.span, {"detail": f"no arrival on '{guard}' reaches cluster rank {c}; release to every rank of the "
                                   f"mask: for r in tp.static_range(...): tp.mbarrier_arrive({guard}[s], cta=r)"}))
        else:
            r0, c = pairs[0]
            out.append(Finding(
                "pipeline_hazard", "error", f"pipeline hazard: the consumers of cluster rank {r0} never release to "
                f"rank {c}, whose multicast writes into their stage: rank {c} refills a stage rank {r0} may still "
                f"read (its '{guard}' completes on other releases)", s.span,
                {"detail": f"release to every rank of the mask (cta=r for each r), with '{guard}' counting one "
                           "release per block"}))
    return out


def remote_writes_awaited(kir, analysis, solve) -> bool:
    """Does every block wait, before it exits, for every remote arrival into it and every multicast copy into its
    shared memory (the CUTLASS producer tail: after its ring the producer waits on `empty` for one more phase of
    every stage, so every block's last releases have reached it; its consumers waited on `full` for every
    multicast's phase)? Then no other block writes its shared memory after it exits, and no closing cluster
    barrier is needed for them. `analysis`: the walk of the kernel as written naming array elements by term
    (domain.analyze(kir, symbolic=True)); `solve(term)`: a model or None.

    Counted per element e of each mbarrier array B a remote arrive (cta=) or a multicast copy completes on (the
    blocks are alike: a block receives on B[e] the arrivals it sends, the walk's model, whose cluster side the
    rules above judge): N(e), every arrive op's executions on e over the kernel, and some wait op on B whose last
    execution on e waits for a phase q with (q + 1) C >= N(e): once it returns, all N(e) have landed (the phase
    completes at its (q + 1) C-th arrival, and there are no more). A multicast copy must also be followed in its
    role by an arrive on its element (so its phase is one of those, completed and waited for). Exact for arrive ops
    unconditional at top level on a constant element or in a loop of step 1 on (k + d) % R or a constant element,
    and wait ops on those elements in such a loop (their last execution on e in closed form); anything else: not
    proved (False)."""
    from ..periodic import _smax
    from ..vc import AND, NOT, OR, cmp, const_of, linear_form, subst

    arrays = {}
    for x in analysis.arrives:
        arrays.setdefault(x.bar, []).append(x)
    ops = analysis.__dict__.get("_arrive_ops", {})
    remote = set()
    for s in ir.walk(kir.body):
        if isinstance(s, ir.Eval) and ((s.call.op == "mbarrier_arrive" and len(s.call.args) > 1)
                                       or (s.call.op == "copy_bulk" and "multicast" in s.call.attrs)):
            b = s.call.args[0] if s.call.op == "mbarrier_arrive" else s.call.args[2]
            if not (isinstance(b, ir.Call) and b.op == "mbarrier_at" and isinstance(b.args[0], ir.Var)):
                return False  # (a plain mbarrier: not counted here)
            remote.add(f"mbar:{b.args[0].name}")
    stages = {}
    for s in ir.walk(kir.body):
        if isinstance(s, ir.Assign) and isinstance(s.value, ir.Call) and s.value.op == "mbarrier":
            stages[f"mbar:{s.name}"] = s.value.attrs.get("stages")

    def element(term, L):
        """('const', c) | ('mod', d, R) of an element term in loop L (None: the loop's own), or None."""
        c = const_of(term)
        if c is not None:
            return ("const", c)
        if L is None or not (hasattr(term, "op") and term.op == "%"):
            return None
        R, lin = const_of(term.b), linear_form(term.a)
        if R is None or R < 1 or lin is None or lin.get(L.var, 0) != 1 or set(lin) - {L.var, 1}:
            return None
        return ("mod", lin.get(1, 0), R)

    def executions(x, e):
        """How many times arrive op x arrives on element e (a term), or None."""
        loops = tuple(x.point.loops)
        if x.point.path is False:
            return 0  # (under a guard the walk folded to False: never)
        if x.point.path is not True or len(loops) > 1:
            return None
        L = loops[0] if loops else None
        el = element(x.elem, L)
        if el is None or (L is not None and const_of(L.step) != 1):
            return None
        if L is None:
            return 1 if el[1] == e else 0
        n = _smax(L.stop - L.start, 0)
        if el[0] == "const":
            return n if el[1] == e else 0
        _, d, R = el
        r = (e - d) % R  # iterations k = r (mod R) in [start, max(stop, start))
        top = _smax(L.stop, L.start)
        return (top - 1 - r) // R - (L.start - 1 - r) // R

    for bar in sorted(remote):
        S = stages.get(bar)
        C = analysis.mbarriers.get(bar)
        if not S or C is None or sum(n for (b, _r), n in ops.items() if b == bar) != len(arrays.get(bar, [])):
            return False  # (an arrive op the walk did not record: not counted)
        waits = [w for w in analysis.waits if w.bar == bar and w.phase is not None]
        for e in range(S):
            counts = [executions(x, e) for x in arrays.get(bar, [])]
            if any(c is None for c in counts):
                return False
            total = sum(counts)
            ok = [cmp("<=", total, 0)]  # (no arrival on e at all)
            for w in waits:  # the last execution of w on e, and its phase covering every arrival
                loops = tuple(w.point.loops)
                if len(loops) != 1 or const_of(loops[0].step) != 1:
                    continue
                L = loops[0]
                el = element(w.elem, L)
                if el is None:
                    continue
                if el[0] == "const":
                    if el[1] != e:
                        continue
                    k = L.stop - 1
                else:
                    _, d, R = el
                    k = L.stop - 1 - (L.stop - 1 + d - e) % R
                m = {L.var.name: k}
                ok.append(AND(cmp(">=", k, L.start), subst(w.point.path, m),
                              cmp(">=", (subst(w.phase, m) + 1) * C, total)))
            if solve(NOT(OR(*ok))) is not None:
                return False
    # a multicast copy's phase must be one of those counted: an arrive on its element after it in its role
    for a in analysis.accesses:
        if a.kind != "async" or a.bar not in remote or not getattr(a.op, "attrs", {}).get("multicast"):
            continue
        if not any(x.bar == a.bar and tuple(x.point.loops) == tuple(a.point.loops) and x.point.path is True
                   and x.elem is not None and a.elem is not None and _same_term(x.elem, a.elem)
                   and _after(x.point, a.point) for x in arrays.get(a.bar, [])):
            return False
    return True


def _same_term(a, b) -> bool:
    from ..vc import linear_form

    if a is b or a == b:
        return True
    la, lb = linear_form(a), linear_form(b)
    return la is not None and la == lb


def _after(p2, p1) -> bool:
    """p2 comes after p1 in their (common) loop body: the statement counter T differs by a positive constant."""
    from ..vc import linear_form

    lin = linear_form(p2.counters.get("T", 0) - p1.counters.get("T", 0))
    return lin is not None and not set(lin) - {1} and lin.get(1, 0) > 0
