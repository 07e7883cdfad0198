"""The abstract state: one walk over a kernel's IR that turns every value into a symbolic map and every
shared-memory access, barrier, async-copy wait and tag assertion into an event the checks reason about
(the values and events are defined in events.py, the operations on values in values.py). This module holds
the walk itself: its driver, statements, scalars and value ops; the ops that touch memory or synchronize are
memory_events.py (a mixin of the walker).

Per-thread facts (which thread touches which element of a tile) come from evaluating the layouts on all
(thread, value) slots with numpy: exact and cheap for the few hundred threads of a block. The same layouts
evaluated on `Var`s give the symbolic maps used in counterexamples and in the MMA tag conditions.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np

from tilepy import ir
from tilepy.ops import ATOMICS, OPS, UNARY_MATH
from tilepy.symbolic import BinOp, Var
from tilepy.targets import get_target
from tilepy.types import RegType, ScalarType, TensorType

from . import periodic, symbolic_ring, tile_ops
from .events import (
    UNKNOWN,
    Analysis,
    GView,
    Loop,
    Point,
    Reg,
    SharedAlloc,
    SRef,
    TensorVal,
    fresh,
    intlike,
)
from .memory_events import MemoryEvents
from .reaching import frame_of, frame_permute, frame_window
from .sync import drop_dead_roles, prescan
from .tagterms import Alt, product
from .values import (
    after_loop,
    compose,
    compose_v,
    fold,
    foldable,
    intersect,
    join,
    same_value,
    scalar_minmax,
    scalar_op,
    value_names,
)
from .vc import AND, NOT, OR, Solver_, cmp, evaluate_term, in_range, select, subst, term_vars

# Ops without an op_/eff_ method of the walker: those it computes element by element (tag and value maps composed
# per element), and those that are no event of the analysis, with the reason.
# (on register tiles; a scalar math op is a value the analysis does not model; `where` has its own method)
ELEMENTWISE = frozenset(UNARY_MATH)
NOT_EVENTS = {
    "mbarrier_at": "mbarrier arrays are rewritten into one mbarrier per stage before the walk (mbarrier_arrays.py)",
    "mma_wait": "asynchronous wgmma groups are checked before the walk (mbarrier_arrays.py)",
    "setmaxnreg": "a register budget: no value, no memory access",
    "schedule": "scheduling hints for the backend: no device semantics",
}


def coverage() -> dict:
    """For every op of the catalogue: how the walker handles it ("op" / "effect": a method, "elementwise",
    "not an event: <why>", or None: not at all)."""
    out = {}
    for op in OPS:
        if hasattr(_Walker, f"eff_{op}"):
            out[op] = "effect"
        elif hasattr(_Walker, f"op_{op}"):
            out[op] = "op"
        elif op in ELEMENTWISE:
            out[op] = "elementwise"
        elif op in NOT_EVENTS:
            out[op] = "not an event: " + NOT_EVENTS[op]
        else:
            out[op] = None
    return out


def analyze(kir, symbolic=False) -> Analysis:
    """Walk `kir` once (loops twice: a first pass measures the body) and collect the events. `symbolic`: name an
    mbarrier array's element by its term (the kernel as written, its rings not unrolled: symbolic_ring.py)."""
    return _Walker(kir, symbolic).run()


class _Walker(MemoryEvents):
    def __init__(self, kir, symbolic=False):
        self.kir = kir
        self.symbolic = symbolic
        self.ring_allocs = symbolic_ring.ring_allocs(kir) if symbolic else set()
        self.target = get_target(kir.target)
        self.T = kir.num_threads
        self.ws = self.target.warp_size
        self.A = Analysis(kir, self.target, self.T)
        self.tensor_tags: dict = {}
        # Tensors the kernel writes: what a later read of them sees may be the kernel's own data, not the
        # tag function's, so their tags are unknown (sound) rather than taken from the function.
        self.written_tensors = _written_params(kir)
        self.recording = True
        self.writes: list = []  # WriteRec in program order (this pass)
        self.tid = np.arange(self.T)
        self._ids = itertools.count()
        self.alloc_by_op: dict = {}
        self.mwaits: list = []  # mbarrier waits of this pass, in program order (reaching.py)
        self._solver = None

    def solve(self, term):
        """A model of `term` or None (a walker-side query: prefix-closed guards, monotone phases)."""
        if self._solver is None:
            self._solver = Solver_(unknown="possible")
        for lp in self._all_loops:
            self._solver.facts[lp.trip.name] = lp.trip_def()
        return self._solver.check(term, small=False)

    # ----------------------------------------------------------------- driver
    def run(self) -> Analysis:
        env = {}
        for p in self.kir.params:
            if isinstance(p.type, TensorType):
                env[p.name] = TensorVal(p.name, p.type)
            elif isinstance(p.type, ScalarType) and p.type.dtype.is_int:
                env[p.name] = Var(f"p:{p.name}")
            else:
                env[p.name] = UNKNOWN
        counters = {"B": 0, "T": 0, "C:async": 0}
        state = _State(env, counters, True, None, (), ())
        self._all_loops = []
        prescan(self.kir.body, self.A, self.symbolic)
        try:
            self.block(self.kir.body, state)
        finally:
            if self._solver is not None:
                self._solver.close()
        drop_dead_roles(self.A)
        return self.A

    def point(self, st, span) -> Point:
        copy = st.copy if st.copy is not None and st.loops and st.loops[-1] is st.copy[0] else None
        return Point(st.loops, dict(st.counters), st.path, st.threads, st.role, span, copy)

    def bump(self, st, key, n=1):
        st.counters[key] = st.counters.get(key, 0) + n

    # ----------------------------------------------------------------- statements
    def block(self, stmts, st):
        for s in stmts:
            self.bump(st, "T")
            if isinstance(s, ir.Assign):
                self.name_hint = s.name
                st.env[s.name] = self.expr(s.value, st)
            elif isinstance(s, ir.Eval):
                self.effect(s.call, st, s.span)
            elif isinstance(s, ir.For):
                self.loop(s, st)
            elif isinstance(s, ir.If):
                self.branch(s, st)

    def loop(self, s: ir.For, st):
        start, stop, step = (self.scalar(e, st) for e in (s.start, s.stop, s.step))
        start, stop, step = (fresh("u") if v is UNKNOWN or not intlike(v) else v for v in (start, stop, step))
        lid = next(self._ids)
        lp = Loop(lid, s.var, Var(f"{s.var}#{lid}"), start, stop, step, Var(f"trip#{lid}"), s.span, s.stages,
                  st.loops[-1] if st.loops else None)
        self._all_loops.append(lp)
        self.A.trip_facts[lp.trip.name] = lp.trip_def()
        carried = _loop_carried(s.body) & set(st.env)
        # Pass 1: measure one iteration (counters from 0) and learn its shared writes and loop-carried values.
        saved = (self.recording, self.writes, self.mwaits)
        self.recording = False
        self.writes = list(saved[1])
        self.mwaits = list(saved[2])
        env1 = dict(st.env)
        for name in carried:
            if not isinstance(env1[name], Reg):
                env1[name] = fresh("carried")
        env1[s.var] = lp.var
        zero = {k: 0 for k in st.counters}
        st1 = _State(env1, dict(zero), st.path, st.threads, st.loops + (lp,), st.role)
        st1.divergent = st.divergent
        st1.copy = st.copy
        n0 = len(self.writes)
        self.block(s.body, st1)
        body_writes = [w for w in self.writes[n0:]]
        lp.mwaits = self.mwaits[len(saved[2]):]
        self.recording, self.writes, self.mwaits = saved
        v_iter = {k: v for k, v in st1.avalid.items() if v is not True}
        lp.cost = {k: st1.counters.get(k, 0) for k in set(st1.counters) | set(st.counters)}
        lp.writes = body_writes
        lp.base = dict(st.counters)
        for k in lp.cost:
            lp.base.setdefault(k, 0)
        # Arrival counters bumped under a periodic guard (periodic.py): the iterations' count as a floor term.
        allowed = {x.var.name for x in st.loops} | {x.trip.name for x in st.loops}
        lp.periodic = {k: periodic.summed(c, lp, allowed) for k, c in lp.cost.items()
                       if k.startswith("A:") and not isinstance(c, int) and lp.var.name in term_vars(c)}
        # Pass 2: the real walk, counters affine in the iteration index.
        env2 = dict(st.env)
        folds = {}
        for name in carried:
            v0, v1 = st.env[name], env1.get(name)
            env2[name] = join(v0, v1)
            if foldable(v0, v1, env2[name]):
                # an accumulator whose tag changes every iteration: the fold of the iterations before this one
                folds[name] = (v0, v1)
                env2[name] = fold(v0, v1, lp, after=False)
        env2[s.var] = lp.var
        n = lp.index()
        ctr = {k: lp.base[k] + n * lp.cost[k] for k in lp.cost if k not in lp.periodic}
        for k, terms in lp.periodic.items():
            ctr[k] = (fresh(f"cnt_{k}") if terms is None
                      else lp.base[k] + periodic.total(terms, lp.start, lp.var, ordered=True))
        lp.ctr = dict(ctr)
        st2 = _State(env2, ctr, st.path, st.threads, st.loops + (lp,), st.role)
        st2.divergent = st.divergent
        st2.copy = st.copy
        closed = self.prefix_closed_all(lp, v_iter)
        st2.avalid = dict(st.avalid)
        for k, terms in lp.periodic.items():
            if terms is None:
                st2.avalid[k] = False
        for k, v in v_iter.items():
            prev = subst(v, {lp.var.name: lp.var - lp.step}) if closed[k] else False
            st2.avalid[k] = AND(st.avalid.get(k, True), OR(cmp("==", n, 0), prev))
        self.block(s.body, st2)
        if self.recording:
            self.A.loops.append(lp)
        # After the loop: counters advanced by trip * cost; assigned values joined.
        for k in lp.cost:
            terms = lp.periodic.get(k, ())
            if terms is None:
                st.counters[k], st.avalid[k] = fresh(f"cnt_{k}"), False
            elif terms:
                st.counters[k] = lp.base[k] + periodic.total(terms, lp.start, lp.start + lp.trip)
            else:
                st.counters[k] = lp.base[k] + lp.trip * lp.cost[k]
        for k, v in v_iter.items():
            last = subst(v, {lp.var.name: lp.start + (lp.trip - 1) * lp.step}) if closed[k] else False
            st.avalid[k] = AND(st.avalid.get(k, True), OR(cmp("==", lp.trip, 0), last))
        for name in _assigned(s.body):
            if name in folds:
                st.env[name] = fold(*folds[name], lp, after=True)
            elif name in st2.env:
                st.env[name] = join(st.env.get(name), after_loop(st2.env[name], lp))

    def _not_prefix_closed(self, lp, v):
        """Models: `v` (a bool term over lp.var) holds at iteration n but not at an earlier one."""
        i = fresh("pc")
        earlier = lp.start + i * lp.step
        return AND(lp.constraint(), cmp(">=", i, 0), cmp("<", earlier, lp.var), v,
                   NOT(subst(v, {lp.var.name: earlier})))

    def prefix_closed_all(self, lp, vs: dict) -> dict:
        """{key: does v holding at iteration n imply it held at every earlier one} for the validity terms `vs`
        (one per mbarrier counter; a ring unrolled per stage has one per stage): one query for all of them, each
        alone only when that one has a model. The disjunction is asked through its linear abstraction first
        (`_unsat_abstracted`), then as it is. (Asking it as it is for tickets.QUICK_RLIMIT first cost gemm_streamk
        narrow 0.2-0.4 s: encoding the large disjunction as it is, then the abstraction anyway.)"""
        qs = {k: self._not_prefix_closed(lp, v) for k, v in vs.items()}
        if len(qs) > 1:
            q = OR(*qs.values())
            if self._unsat_abstracted(q) or self.solve(q) is None:
                return dict.fromkeys(qs, True)
        return {k: self.solve(q) is None for k, q in qs.items()}

    def _unsat_abstracted(self, term) -> bool:
        """True when the linear abstraction of `term` (checks/tickets.py: each product of two unknowns and each
        division by a run-time divisor a variable of its own, a relaxation) has no model, so neither has `term`.
        False says nothing. A ring's guards compare the slot with a share's bounds (stream-K's
        block * total // grid): the monotonicity a prefix-closed query asks about never needs their values."""
        from .checks.tickets import linear_abstraction

        if self._solver is None:
            self._solver = Solver_(unknown="possible")
        if getattr(self, "_nl", None) is None or self._nl.solver is not self._solver:
            self._nl = SimpleNamespace(solver=self._solver)  # the abstraction's names and memos, per solver
        abstract = linear_abstraction(self._nl, term)
        return abstract is not term and self.solve(abstract) is None

    def branch(self, s: ir.If, st):
        cond = self.scalar(s.cond, st)
        per_thread = "tid" in value_names(cond)
        if s.kind == "role" or per_thread:
            mask = self.thread_mask(cond, st)
            rid = id(s)  # stable over both walks of an enclosing loop (sync.py keys arrival counters by role)
            for branch, body, m in ((0, s.then, mask), (1, s.orelse, None if mask is None else ~mask)):
                threads = st.threads if m is None else intersect(st.threads, np.nonzero(m)[0])
                sub = _State(dict(st.env), st.counters, st.path, threads, st.loops, st.role + ((rid, branch),))
                sub.avalid = st.avalid
                sub.divergent = (s, mask)
                sub.selmode = st.selmode
                sub.copy = st.copy
                self.block(body, sub)
                for k, v in sub.env.items():
                    if st.env.get(k) is not v:
                        st.env[k] = join(st.env.get(k), v)
            return
        c = cond if cond is not UNKNOWN else ("bvar", f"if#{next(self._ids)}")
        before = dict(st.counters)
        sel = st.selmode if st.loops and st.selmode is st.loops[-1] else None
        if sel is None and st.loops and isinstance(c, tuple):
            allowed = {x.var.name for x in st.loops[:-1]} | {x.trip.name for x in st.loops[:-1]}
            if periodic.has_period(c, st.loops[-1], allowed):
                sel = st.loops[-1]  # a guard periodic in the innermost loop: exact counters as Select terms
        t_state = _State(dict(st.env), dict(before), AND(st.path, c), st.threads, st.loops, st.role)
        t_state.divergent = st.divergent
        t_state.avalid = dict(st.avalid)
        t_state.selmode = sel
        sc = getattr(s, "stage_copy", None)
        t_state.copy = (st.loops[-1], *sc) if sc is not None and st.loops else st.copy
        self.block(s.then, t_state)
        e_counters = dict(before)
        e_counters["T"] = t_state.counters["T"]
        e_state = _State(dict(st.env), e_counters, AND(st.path, NOT(c)), st.threads, st.loops, st.role)
        e_state.divergent = st.divergent
        e_state.avalid = dict(st.avalid)
        e_state.selmode = sel
        e_state.copy = st.copy
        self.block(s.orelse, e_state)
        for k in set(t_state.counters) | set(e_state.counters):
            a, b = t_state.counters.get(k, 0), e_state.counters.get(k, 0)
            va, vb = t_state.avalid.get(k, True), e_state.avalid.get(k, True)
            if k == "T":
                st.counters[k] = b
            elif sel is not None and k.startswith("A:") and not same_value(a, b):
                # under a periodic guard: the count on either path, exact on both (the loop sums it: periodic.py)
                st.counters[k] = select(c, a, b)
                st.avalid[k] = va if va is vb else OR(AND(c, va), AND(NOT(c), vb))
            elif same_value(a, b):
                st.counters[k] = a
                if k.startswith("A:"):
                    st.avalid[k] = va if va is vb else OR(AND(c, va), AND(NOT(c), vb))
            elif k.startswith("A:") and same_value(b, before.get(k, 0)):
                # arrivals only on the then path: exact where the condition held (sync.py, loop validity)
                st.counters[k], st.avalid[k] = a, AND(c, va)
            elif k.startswith("A:") and same_value(a, before.get(k, 0)):
                st.counters[k], st.avalid[k] = b, AND(NOT(c), vb)
            else:
                st.counters[k] = fresh(f"cnt_{k}")
                if k.startswith("A:"):
                    st.avalid[k] = False
        for k in set(t_state.env) | set(e_state.env):
            a, b = t_state.env.get(k), e_state.env.get(k)
            st.env[k] = a if a is b else join(a, b)

    def thread_mask(self, cond, st):
        """Which threads take a thread-dependent branch (None when it also depends on unknowns)."""
        if cond is UNKNOWN:
            return None
        names = term_vars(cond)
        if names - {"tid"}:
            return None
        return np.array([bool(evaluate_term(cond, {"tid": t})) for t in range(self.T)])

    # ----------------------------------------------------------------- scalars
    def scalar(self, e, st):
        v = self.expr(e, st)
        return v

    def expr(self, e, st):
        if isinstance(e, ir.Const):
            if isinstance(e.value, bool):
                return e.value
            if isinstance(e.value, int):
                return e.value
            return UNKNOWN
        if isinstance(e, ir.Var):
            return st.env.get(e.name, UNKNOWN)
        if isinstance(e, ir.BinOp):
            return self.binop(e, st)
        if isinstance(e, ir.UnOp):
            x = self.expr(e.operand, st)
            if isinstance(e.type, RegType):
                return self.elementwise(e, [x], st)
            if x is UNKNOWN:
                return UNKNOWN
            if e.op == "not":
                return NOT(x) if not intlike(x) else cmp("==", x, 0)
            if e.op == "-" and intlike(x):
                return 0 - x
            if e.op == "~" and intlike(x):
                return -1 - x
            return UNKNOWN
        if isinstance(e, ir.Call):
            return self.call(e, st)
        return UNKNOWN

    def binop(self, e, st):
        a, b = self.expr(e.lhs, st), self.expr(e.rhs, st)
        if isinstance(e.type, RegType):
            return self.elementwise(e, [a, b], st)
        return scalar_op(e.op, a, b)

    # ----------------------------------------------------------------- calls
    def effect(self, e: ir.Call, st, span):
        m = getattr(self, f"eff_{e.op}", None)
        if m is not None:
            m(e, st)
        else:
            self.expr(e, st)

    def call(self, e: ir.Call, st):
        op = e.op
        m = getattr(self, f"op_{op}", None)
        if m is not None:
            return m(e, st)
        if op in ELEMENTWISE and isinstance(e.type, RegType):
            return self.elementwise(e, [self.expr(a, st) for a in e.args if isinstance(a, ir.Expr)], st)
        return UNKNOWN

    def op_block_id(self, e, st):
        return Var(f"block{e.attrs.get('axis', 0)}")

    def op_num_blocks(self, e, st):
        return Var(f"grid{e.attrs.get('axis', 0)}")

    def op_cluster_rank(self, e, st):
        """Rank in the cluster: consecutive blocks along x (then y, z) form one (tilepy.kernel's cluster=)."""
        cx, cy, cz = getattr(self.kir, "cluster", (1, 1, 1))
        return Var("block0") % cx + (Var("block1") % cy) * cx + (Var("block2") % cz) * (cx * cy)

    def eff_cluster_sync(self, e, st):
        # within the block, a barrier of all its threads (the cluster-wide part: checks/cluster.py); a relaxed one
        # orders no memory: not a barrier here
        if not e.attrs.get("relaxed"):
            self.eff_barrier(e, st)

    def op_thread_id(self, e, st):
        return Var("tid")

    def op_lane_id(self, e, st):
        return Var("tid") % self.ws

    def op_warp_id(self, e, st):
        return Var("tid") // self.ws

    def op_warpgroup_id(self, e, st):
        return Var("tid") // (4 * self.ws)

    def op_dim(self, e, st):
        t = self.expr(e.args[0], st)
        d = t.type.shape[e.attrs["axis"]]
        return d if isinstance(d, int) else Var(f"dim:{d}")

    def op_cdiv(self, e, st):
        a, b = self.expr(e.args[0], st), self.expr(e.args[1], st)
        if not (intlike(a) and intlike(b)):
            return UNKNOWN
        return (a + b - 1) // b

    def op_min(self, e, st):
        return self._minmax("min", e, st)

    def op_max(self, e, st):
        return self._minmax("max", e, st)

    def op_minimum(self, e, st):
        return self._minmax("min", e, st)

    def op_maximum(self, e, st):
        return self._minmax("max", e, st)

    def op_where(self, e, st):
        """`a if c else b` / tp.where(c, a, b): tiles element by element; two integer scalars under a modelled
        condition: the term Select(c, a, b) (vc.py; Z3's if-then-else: like min / max it keeps its meaning
        under a negated path and renames with its arguments in every instance of a point); anything else is an
        unmodelled value."""
        args = [self.expr(a, st) for a in e.args if isinstance(a, ir.Expr)]
        if isinstance(e.type, RegType):
            return self.elementwise(e, args, st)
        if len(args) != 3:
            return UNKNOWN
        c, a, b = args
        if c is True or c is False:
            return a if c else b if intlike(a) and intlike(b) else UNKNOWN
        if c is UNKNOWN or intlike(c) or not (intlike(a) and intlike(b)):
            return UNKNOWN
        if "tid" in term_vars(c) | term_vars(a) | term_vars(b):
            return UNKNOWN  # a per-thread value: not a uniform scalar
        return select(c, a, b)

    def _minmax(self, op, e, st):
        """Scalar min / max of two integers: the term min(a, b) (vc.py encodes it with its definition as a
        side condition of the whole query, so it means the same under a negation and renames with its
        arguments in every instance of a point); tiles: element by element."""
        args = [self.expr(a, st) for a in e.args if isinstance(a, ir.Expr)]
        if isinstance(e.type, RegType):
            return self.elementwise(e, args, st)
        if len(args) != 2:
            return fresh(op)
        a, b = args
        v = scalar_minmax(op, a, b)
        if v is UNKNOWN:
            return fresh(op)
        if v is not None:
            return v
        return BinOp(op, a, b)

    def op_view(self, e, st):
        base = self.expr(e.args[0], st)
        starts = tuple(self.expr(a, st) for a in e.args[1:])
        starts = tuple(s if intlike(s) else fresh("start") for s in starts)
        if isinstance(base, GView):  # view of a view
            keep = [d for d, q in enumerate(base.squeeze) if not q]
            full_st, full_sz, full_sq = list(base.starts), list(base.sizes), list(base.squeeze)
            for j, d in enumerate(keep):
                full_st[d] = full_st[d] + starts[j]
                full_sz[d] = e.attrs["sizes"][j]
                full_sq[d] = e.attrs["squeeze"][j]
            return GView(base.param, base.type, base.dims, tuple(full_st), tuple(full_sz), tuple(full_sq), e.span)
        dims = tuple(d if isinstance(d, int) else Var(f"dim:{d}") for d in base.type.shape)
        return GView(base.param, base.type, dims, starts, tuple(e.attrs["sizes"]), tuple(e.attrs["squeeze"]),
                     e.span)

    def op_shared(self, e, st):
        a = self.alloc_by_op.get(id(e))
        if a is None:
            a = SharedAlloc(len(self.A.allocs), getattr(self, "name_hint", None) or f"shared{len(self.A.allocs)}",
                            e.attrs.get("type") or e.type, e.span)
            self.alloc_by_op[id(e)] = a
            self.A.allocs.append(a)
        return SRef(a, None)

    def op_shared_permute(self, e, st):
        ref = self.expr(e.args[0], st)
        dims = tuple(e.attrs["dims"])
        base = ref.view or (ref.alloc.type.stage() if ref.alloc.type.stages else ref.alloc.type)
        frame = frame_permute(ref.frame or frame_of(base.shape), dims)
        return SRef(ref.alloc, ref.stage, base.permute(dims), frame, ref.origin)

    def op_shared_window(self, e, st):
        ref = self.expr(e.args[0], st)
        starts, sizes, squeeze = (tuple(e.attrs[k]) for k in ("starts", "sizes", "squeeze"))
        base = ref.view or (ref.alloc.type.stage() if ref.alloc.type.stages else ref.alloc.type)
        wtype, origin = base.window(starts, sizes, squeeze)
        frame = frame_window(ref.frame or frame_of(base.shape), starts, sizes, squeeze)
        return SRef(ref.alloc, ref.stage, wtype, frame, ref.origin + origin)

    def op_stage(self, e, st):
        ref = self.expr(e.args[0], st)
        idx = self.expr(e.args[1], st)
        if not intlike(idx):
            idx = fresh("stage")
        return SRef(ref.alloc, idx)

    def op_zeros(self, e, st):
        return Reg(e.type, None, (lambda c: 0) if e.type.dtype.is_int else None, (), e.span)

    def op_full(self, e, st):
        v = self.expr(e.args[0], st)
        return Reg(e.type, None, (lambda c, v=v: v) if intlike(v) or isinstance(v, bool) else None, (), e.span)

    def op_arange(self, e, st):
        return Reg(e.type, None, lambda c: c[0], (), e.span)

    def op_expand_dims(self, e, st):
        x = self.expr(e.args[0], st)
        ax = e.attrs["axis"]

        def drop(c, ax=ax):
            return c[:ax] + c[ax + 1:]

        return Reg(e.type, compose(x.tag, drop), compose_v(x.value, drop), x.pairs, x.src)

    def op_convert_layout(self, e, st):
        x = self.expr(e.args[0], st)
        return Reg(e.type, x.tag, x.value, x.pairs, x.src, x.from_pairs)

    def op_cast(self, e, st):
        x = self.expr(e.args[0], st)
        if isinstance(x, Reg):
            return Reg(e.type, x.tag, x.value, x.pairs, x.src, x.from_pairs)
        return x if intlike(x) and e.type.dtype.is_int else UNKNOWN

    def _reduce(self, e, st):
        x = self.expr(e.args[0], st)
        ax, keep = e.attrs["axis"], e.attrs.get("keepdims", False)
        n = x.type.shape[ax]

        def tag(c, x=x, ax=ax, keep=keep, n=n):
            r = fresh("r")
            full = c[:ax] + (r,) + (c[ax + 1:] if keep else c[ax:])
            return [Alt(AND(a.cond, in_range(r, 0, n)), a.tag, a.src) for a in x.tag(full)]

        return Reg(e.type, tag if x.tag is not None else None, None, (), e.span)

    op_sum = op_max_reduce = op_min_reduce = op_prod = _reduce

    # scans and shape changes of register tiles: tilepy_verify/tile_ops.py
    def op_scan_sum(self, e, st):
        return tile_ops.scan(self, e, st)

    op_scan_prod = op_scan_sum

    def op_permute(self, e, st):
        return tile_ops.permute(self, e, st)

    def op_reshape(self, e, st):
        return tile_ops.reshape(self, e, st)

    def op_tile_window(self, e, st):
        return tile_ops.tile_window(self, e, st)

    def elementwise(self, e, vals, st):
        shape = e.type.shape
        regs = [v for v in vals if isinstance(v, Reg)]
        tagged = any(v.tag is not None for v in regs)

        def at(v, c):
            if isinstance(v, Reg):
                vs = v.type.shape
                cc = tuple(0 if n == 1 and m != 1 else x for x, n, m in zip(c, vs, shape))
                return v, cc
            return v, None

        def tag(c):
            lists = []
            for v in vals:
                r, cc = at(v, c)
                if isinstance(r, Reg) and r.tag is not None:
                    lists.append(r.tag(cc))
                else:
                    lists.append([Alt(True, None)])
            return product(lists, tuple)

        value = None
        if e.type.dtype.is_int or e.type.dtype.kind == "bool":
            if all(isinstance(v, Reg) and v.value is not None or intlike(v) or isinstance(v, bool)
                   or isinstance(v, tuple) and v and v[0] in ("cmp", "and", "or", "not", "bvar") for v in vals):
                # (a scalar condition, e.g. on a block id, ANDed into a mask tile is a bool term: kept)
                op = e.op if isinstance(e, ir.BinOp) else None

                def value(c, op=op):
                    xs = []
                    for v in vals:
                        r, cc = at(v, c)
                        xs.append(r.value(cc) if isinstance(r, Reg) else r)
                    if op is None or len(xs) != 2:
                        return UNKNOWN
                    return scalar_op(op, xs[0], xs[1])

        return Reg(e.type, tag if tagged else None, value, (), e.span)

class _State:
    def __init__(self, env, counters, path, threads, loops, role):
        self.env, self.counters, self.path, self.threads, self.loops, self.role = (
            env, counters, path, threads, loops, role)
        self.divergent = None
        self.avalid: dict = {}  # arrival counter -> bool term under which its value is exact
        self.selmode = None  # the innermost loop, where arrival counters merge as Select terms (periodic.py)
        self.copy = None  # (round loop, S, c) inside a ring's stage copy (events.Point.copy)




def _assigned(stmts) -> set:
    out = set()
    for s in ir.walk(stmts):
        if isinstance(s, ir.Assign):
            out.add(s.name)
    return out


def _loop_carried(body) -> set:
    """Variables read in the body before the body (re)assigns them: their value flows between iterations."""
    assigned = _assigned(body)
    exposed: set = set()
    defined: set = set()

    def uses(e):
        for x in ir.walk_exprs(e):
            if isinstance(x, ir.Var) and x.name not in defined:
                exposed.add(x.name)

    def go(stmts, definite=True):
        for s in stmts:
            if isinstance(s, ir.Assign):
                uses(s.value)
                if definite:
                    defined.add(s.name)
            elif isinstance(s, ir.Eval):
                uses(s.call)
            elif isinstance(s, ir.For):
                for e in (s.start, s.stop, s.step):
                    uses(e)
                go(s.body, False)
            elif isinstance(s, ir.If):
                uses(s.cond)
                go(s.then, False)
                go(s.orelse, False)

    go(body)
    return exposed & assigned


def _written_params(kir) -> set:
    """Names of the tensor parameters some store or copy writes."""
    out = set()
    for stmt in ir.walk(kir.body):
        if not isinstance(stmt, ir.Eval | ir.Assign):
            continue
        call = stmt.call if isinstance(stmt, ir.Eval) else stmt.value
        if not isinstance(call, ir.Call) or call.op not in ("store", "copy", *ATOMICS):
            continue
        dst = call.args[1] if call.op == "copy" else call.args[0]
        if isinstance(dst, ir.Call) and dst.op in ("view", "gather_view") and isinstance(dst.args[0], ir.Var):
            out.add(dst.args[0].name)
    return out
