"""The abstract state: one walk over a kernel's IR that turns every value into a symbolic map and every
shared-memory access, barrier, async-copy wait and tag assertion into an event the checks reason about
(the values and events are defined in events.py, the operations on values in values.py).

Per-thread facts (which thread touches which element of a tile) come from evaluating the layouts on all
(thread, value) slots with numpy: exact and cheap for the few hundred threads of a block. The same layouts
evaluated on `Var`s give the symbolic maps used in counterexamples and in the MMA tag conditions.
"""

from __future__ import annotations

import itertools

import numpy as np

from tilepy import ir
from tilepy.instructions import mma_operand_layout
from tilepy.ops import ATOMICS, OPS, UNARY_MATH
from tilepy.symbolic import Var
from tilepy.targets import get_target
from tilepy.tv_layout import TVLayout, blocked
from tilepy.types import RegType, ScalarType, TensorType

from . import gathers, tile_ops
from .events import (
    UNKNOWN,
    Access,
    Analysis,
    Arrive,
    Assertion,
    BarrierEv,
    GView,
    Loop,
    MmaContrib,
    MmaOp,
    MmaOps,
    OperandTag,
    Point,
    Reg,
    SharedAlloc,
    SRef,
    TensorVal,
    Wait,
    WriteRec,
    arr_key,
    fresh,
    intlike,
)
from .reaching import frame_of, frame_permute, frame_window, reaching_tag
from .sync import prescan
from .tagterms import TOP, Alt, Unknown, eval_tagfn, product
from .values import (
    after_loop,
    compose,
    compose_v,
    intersect,
    join,
    products_tag,
    same_value,
    scalar_minmax,
    scalar_op,
    tagfn_tag,
    untagged,
    value_names,
)
from .vc import AND, NOT, OR, Solver_, cmp, evaluate_term, in_range, is_int, subst, term_vars

# Ops without an op_/eff_ method of the walker: those it computes element by element (tag and value maps composed
# per element), and those that are no event of the analysis, with the reason.
# (on register tiles; a scalar `where` or math op is a value the analysis does not model)
ELEMENTWISE = frozenset(("where", *UNARY_MATH))
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


def analyze(kir) -> Analysis:
    """Walk `kir` once (loops twice: a first pass measures the body) and collect the events."""
    return _Walker(kir).run()


class _Walker:
    def __init__(self, kir):
        self.kir = kir
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
            self._solver = Solver_()
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
        prescan(self.kir.body, self.A)
        try:
            self.block(self.kir.body, state)
        finally:
            if self._solver is not None:
                self._solver.close()
        return self.A

    def point(self, st, span) -> Point:
        return Point(st.loops, dict(st.counters), st.path, st.threads, st.role, span)

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
        n0 = len(self.writes)
        self.block(s.body, st1)
        body_writes = [w for w in self.writes[n0:]]
        self.recording, self.writes, self.mwaits = saved
        v_iter = {k: v for k, v in st1.avalid.items() if v is not True}
        lp.cost = {k: st1.counters.get(k, 0) for k in set(st1.counters) | set(st.counters)}
        lp.writes = body_writes
        lp.base = dict(st.counters)
        for k in lp.cost:
            lp.base.setdefault(k, 0)
        # Pass 2: the real walk, counters affine in the iteration index.
        env2 = dict(st.env)
        for name in carried:
            v0, v1 = st.env[name], env1.get(name)
            env2[name] = join(v0, v1)
        env2[s.var] = lp.var
        n = lp.index()
        ctr = {k: lp.base[k] + n * lp.cost[k] for k in lp.cost}
        st2 = _State(env2, ctr, st.path, st.threads, st.loops + (lp,), st.role)
        st2.divergent = st.divergent
        closed = {k: self.prefix_closed(lp, v) for k, v in v_iter.items()}
        st2.avalid = dict(st.avalid)
        for k, v in v_iter.items():
            prev = subst(v, {lp.var.name: lp.var - lp.step}) if closed[k] else False
            st2.avalid[k] = AND(st.avalid.get(k, True), OR(cmp("==", n, 0), prev))
        self.block(s.body, st2)
        if self.recording:
            self.A.loops.append(lp)
        # After the loop: counters advanced by trip * cost; assigned values joined.
        for k in lp.cost:
            st.counters[k] = lp.base[k] + lp.trip * lp.cost[k]
        for k, v in v_iter.items():
            last = subst(v, {lp.var.name: lp.start + (lp.trip - 1) * lp.step}) if closed[k] else False
            st.avalid[k] = AND(st.avalid.get(k, True), OR(cmp("==", lp.trip, 0), last))
        for name in _assigned(s.body):
            if name in st2.env:
                st.env[name] = join(st.env.get(name), after_loop(st2.env[name], lp))

    def prefix_closed(self, lp, v) -> bool:
        """Does `v` (a bool term over lp.var) holding at iteration n imply it held at every earlier one?"""
        i = fresh("pc")
        earlier = lp.start + i * lp.step
        q = AND(lp.constraint(), cmp(">=", i, 0), cmp("<", earlier, lp.var), v,
                NOT(subst(v, {lp.var.name: earlier})))
        return self.solve(q) is None

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
                self.block(body, sub)
                for k, v in sub.env.items():
                    if st.env.get(k) is not v:
                        st.env[k] = join(st.env.get(k), v)
            return
        c = cond if cond is not UNKNOWN else ("bvar", f"if#{next(self._ids)}")
        before = dict(st.counters)
        t_state = _State(dict(st.env), dict(before), AND(st.path, c), st.threads, st.loops, st.role)
        t_state.divergent = st.divergent
        t_state.avalid = dict(st.avalid)
        self.block(s.then, t_state)
        e_counters = dict(before)
        e_counters["T"] = t_state.counters["T"]
        e_state = _State(dict(st.env), e_counters, AND(st.path, NOT(c)), st.threads, st.loops, st.role)
        e_state.divergent = st.divergent
        e_state.avalid = dict(st.avalid)
        self.block(s.orelse, e_state)
        for k in set(t_state.counters) | set(e_state.counters):
            a, b = t_state.counters.get(k, 0), e_state.counters.get(k, 0)
            va, vb = t_state.avalid.get(k, True), e_state.avalid.get(k, True)
            if k == "T":
                st.counters[k] = b
            elif same_value(a, b):
                st.counters[k] = a
                if k.startswith("A:"):
                    st.avalid[k] = OR(AND(c, va), AND(NOT(c), vb))
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

    def _minmax(self, op, e, st):
        """Scalar min / max of two integers: exact (values.scalar_minmax); tiles: element by element."""
        args = [self.expr(a, st) for a in e.args if isinstance(a, ir.Expr)]
        if isinstance(e.type, RegType):
            return self.elementwise(e, args, st)
        if len(args) != 2:
            return fresh(op)
        v = scalar_minmax(op, *args)
        return fresh(op) if v is UNKNOWN else v

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
            if all(isinstance(v, Reg) and v.value is not None or intlike(v) or isinstance(v, bool) for v in vals):
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

    # ----------------------------------------------------------------- memory
    def op_load(self, e, st):
        src = self.expr(e.args[0], st)
        layout = e.type.layout
        if isinstance(src, SRef):
            tids, vals = self.slots(layout, st)
            acc = self.access(e, st, "read", src, tids, vals, layout)
            tag = self.read_tag(src, acc)
            return Reg(e.type, tag, None, (), e.span)
        gathers.record(self, e, st, "read", src, e.args[2] if e.attrs.get("masked") else None)
        tag = self.global_tag(src)
        return Reg(e.type, tag, None, (), e.span)

    # gather views and atomics: tilepy_verify/gathers.py
    def op_gather_view(self, e, st):
        return gathers.gather_view(self, e, st)

    def op_atomic_add(self, e, st):
        return gathers.atomic(self, e, st)

    op_atomic_max = op_atomic_min = op_atomic_cas = op_atomic_add

    def global_tag(self, view: GView):
        if isinstance(view, gathers.GGather):
            return gathers.gather_tag(self, view)
        fn = self.tensor_tags.get(view.param)
        if fn is None:
            return None
        if view.param in self.written_tensors:
            return lambda c, view=view: [Alt(True, TOP, view.span)]
        span = fn.span

        def tag(c, view=view, fn=fn, span=span):
            try:
                return [Alt(True, eval_tagfn(fn, list(view.global_coords(c))), view.span)]
            except Unknown:
                return [Alt(True, TOP, view.span)]

        return tag

    def effect(self, e: ir.Call, st, span):
        m = getattr(self, f"eff_{e.op}", None)
        if m is not None:
            m(e, st)
        else:
            self.expr(e, st)

    def eff_store(self, e, st):
        dst = self.expr(e.args[0], st)
        val = self.expr(e.args[1], st)
        if not isinstance(dst, SRef):
            n = len(self.A.global_accesses)
            gathers.record(self, e, st, "write", dst, e.args[2] if len(e.args) > 2 else None)
            if len(self.A.global_accesses) > n:  # the stored value, for tp.assert_tag on the tensor
                self.A.store_values[id(self.A.global_accesses[-1])] = val
            return
        vt = e.args[1].type
        layout = vt.layout if isinstance(vt, RegType) and tuple(vt.shape) == dst.shape else \
            blocked(dst.shape, self.branch_threads(st), max(16 // dst.alloc.type.dtype.bytes, 1))
        tids, vals = self.slots(layout, st, owners=True)
        acc = self.access(e, st, "write", dst, tids, vals, layout, partial=len(e.args) > 2)
        tag = val.tag if isinstance(val, Reg) else None
        self.record_write(acc, st, tag)

    def eff_copy(self, e, st):
        src, dst = self.expr(e.args[0], st), self.expr(e.args[1], st)
        shape = tuple(e.args[0].type.shape)
        layout = blocked(shape, self.branch_threads(st), max(16 // e.args[0].type.dtype.bytes, 1))
        tids, vals = self.slots(layout, st, owners=True)
        tag = None
        if isinstance(src, SRef):
            racc = self.access(e, st, "read", src, tids, vals, layout)
            tag = self.read_tag(src, racc)
        else:
            tag = self.global_tag(src)
        if isinstance(dst, SRef):
            wacc = self.access(e, st, "write", dst, tids, vals, layout)
            self.record_write(wacc, st, tag)
        gathers.record(self, e, st, "read", src)  # global sides (for the global race check)
        gathers.record(self, e, st, "write", dst)

    def eff_copy_async(self, e, st):
        src, dst = self.expr(e.args[0], st), self.expr(e.args[1], st)
        shape = tuple(e.args[0].type.shape)
        layout = blocked(shape, self.branch_threads(st), max(16 // e.args[0].type.dtype.bytes, 1))
        tids, vals = self.slots(layout, st, owners=True)
        acc = self.access(e, st, "async", dst, tids, vals, layout, channel="C:async",
                          group=st.counters.get("C:async", 0))
        self.record_write(acc, st, self.global_tag(src))
        gathers.record(self, e, st, "read", src)

    def eff_copy_bulk(self, e, st):
        src, dst = self.expr(e.args[0], st), self.expr(e.args[1], st)
        gathers.record(self, e, st, "read", src)
        bar = _bar_name(e.args[2])
        shape = tuple(e.args[0].type.shape)
        coords = np.indices(shape).reshape(len(shape), -1) if shape else np.zeros((0, 1), dtype=np.int64)
        first = int(st.threads[0]) if st.threads is not None and len(st.threads) else 0
        tids = np.full(coords.shape[1], first)
        acc = self.access(e, st, "async", dst, tids, np.arange(coords.shape[1]), None, channel=f"C:{bar}",
                          group=st.counters.get(f"C:{bar}", 0), coords=tuple(coords))
        key = arr_key(bar, st.role)
        acc.bar, acc.arr, acc.arr_valid = bar, st.counters.get(key, 0), st.avalid.get(key, True)
        self.bump(st, f"C:{bar}")
        self.record_write(acc, st, self.global_tag(src))

    def eff_commit_async(self, e, st):
        self.bump(st, "C:async")

    def eff_wait_async(self, e, st):
        if self.recording:
            self.A.waits.append(Wait(self.point(st, e.span), "C:async", int(e.attrs.get("n", 0)), e.span))

    def eff_mbarrier_wait(self, e, st):
        bar = _bar_name(e.args[0])
        phase = self.scalar(e.args[1], st) if len(e.args) > 1 else UNKNOWN
        w = Wait(self.point(st, e.span), f"C:{bar}", 0, e.span, bar, phase if intlike(phase) else None)
        self.mwaits.append(w)
        if self.recording:
            # a completed phase makes the bulk copies tied to it visible to the waiting role (sync.py)
            self.A.waits.append(w)

    def eff_mbarrier_arrive(self, e, st):
        bar = _bar_name(e.args[0])
        key = arr_key(bar, st.role)
        ev = Arrive(self.point(st, e.span), bar, key, st.counters.get(key, 0), st.avalid.get(key, True), e.span)
        if self.recording:
            self.A.arrives.append(ev)
        self.bump(st, key)

    def op_mbarrier(self, e, st):
        count = e.attrs.get("count")
        if count is None:
            count = getattr(e.type, "count", 1)
        name = getattr(self, "name_hint", None)
        if name is not None and is_int(count):
            self.A.mbarriers[f"mbar:{name}"] = int(count)
        return UNKNOWN

    def eff_barrier(self, e, st):
        self.bump(st, "B")
        if self.recording:
            self.A.barriers.append(BarrierEv(self.point(st, e.span), e.span, st.divergent))

    def eff_tag(self, e, st):
        x = self.expr(e.args[0], st)
        fn = e.attrs["fn"]
        if isinstance(x, TensorVal):
            self.tensor_tags[x.param] = fn
        elif isinstance(x, Reg):
            name = e.args[0].name if isinstance(e.args[0], ir.Var) else None
            if name:
                st.env[name] = Reg(x.type, tagfn_tag(fn, e.span), x.value, x.pairs, x.src)
        elif isinstance(x, SRef):
            n = len(x.alloc.type.shape)
            tids, vals = self.slots(blocked(x.shape, self.T, 1), st, owners=True)
            acc = self.access(e, st, "tag", x if x.stage is not None else SRef(x.alloc, 0), tids, vals, None)
            del n
            self.record_write(acc, st, tagfn_tag(fn, e.span))

    def eff_assert_tag(self, e, st):
        x = self.expr(e.args[0], st)
        at = tuple(self.expr(a, st) for a in e.args[1:])
        if self.recording:
            self.A.assertions.append(Assertion(e, e.span, self.point(st, e.span), e.attrs["fn"], x,
                                               e.attrs.get("message", ""), at))

    def op_mma_operands(self, e, st):
        return MmaOps(self.expr(e.args[0], st))

    def op_mma(self, e, st):
        a, b, c = (self.expr(x, st) for x in e.args[:3])
        instr = e.attrs["instr"]
        warps = tuple(e.attrs.get("warps", (1, 1)))
        M, N = e.args[2].type.shape
        K = e.args[0].type.shape[1]
        pt = self.point(st, e.span)
        operands = {}
        tags = {}
        for which, x, xe, shape in (("a", a, e.args[0], (M, K)), ("b", b, e.args[1], (K, N))):
            if isinstance(x, SRef):
                operands[which] = (xe.type, None)
                frag = instr.operand(which)
                if frag is not None:
                    L = mma_operand_layout(instr, which, shape, warps)
                    tids, vals = self.slots(L, st)
                    acc = self.access(e, st, "read", x, tids, vals, L)
                else:  # wgmma: the hardware reads A's rows / B's columns of each group through a descriptor
                    tids, vals, coords = self.wgmma_slots(instr, which, shape, warps, st)
                    acc = self.access(e, st, "read", x, tids, vals, None, coords=coords, descriptor=True)
                tags[which] = OperandTag(self.read_tag(x, acc) or untagged, None, None)
            else:
                operands[which] = (xe.type, xe.type.layout)
                exp = mma_operand_layout(instr, which, shape, warps) if instr.operand(which) is not None else None
                tags[which] = OperandTag(x.tag or untagged, xe.type.layout, exp)
        operands["c"] = (e.args[2].type, e.args[2].type.layout)
        if self.recording:
            self.A.mma_ops.append(MmaOp(e, e.span, pt, instr, warps, operands))
        contrib = MmaContrib(e, e.span, pt, instr, warps, (M, N, K), tags["a"], tags["b"])
        pairs = tuple(p for p in c.pairs if p.op is not e) + (contrib,) if isinstance(c, Reg) else (contrib,)
        prev = c.tag if isinstance(c, Reg) and c.from_pairs else None
        return Reg(e.type, products_tag(contrib, prev), None, pairs, e.span, True)

    def wgmma_slots(self, instr, which, shape, warps, st):
        gm, gn = warps
        p, q = instr.operand_shape(which)
        r, c = np.indices(shape)
        thr, coords_r, coords_c = [], [], []
        for g in range(gm * gn):
            gi, gj = g % gm, g // gm
            sel = (r // p) % gm == gi if which == "a" else (c // q) % gn == gj
            thr.append(np.full(int(sel.sum()), g * instr.threads))
            coords_r.append(r[sel])
            coords_c.append(c[sel])
        thr = np.concatenate(thr)
        if st.threads is not None and len(st.threads):  # the role's real threads (renumbered from 0 in it)
            thr = st.threads[np.minimum(thr, len(st.threads) - 1)]
        return thr, np.arange(thr.size), (np.concatenate(coords_r), np.concatenate(coords_c))

    # ----------------------------------------------------------------- access plumbing
    def branch_threads(self, st) -> int:
        return self.T if st.threads is None else int(len(st.threads))

    def slots(self, layout: TVLayout, st, owners=False):
        """(real thread, value) of every slot of `layout` that runs, as the interpreter distributes it."""
        T, V = layout.num_threads, layout.num_values
        if owners:
            flat = layout.flat.ravel()
            _, first = np.unique(flat, return_index=True)
            t_idx, v_idx = np.divmod(first, V)
        else:
            t_idx, v_idx = np.divmod(np.arange(T * V), V)
        if st.threads is not None:
            R = len(st.threads)
            if T == R:
                real = st.threads[t_idx]
            elif T == self.T:
                keep = np.isin(t_idx, st.threads)
                t_idx, v_idx = t_idx[keep], v_idx[keep]
                real = t_idx
            else:
                real = st.threads[np.minimum(t_idx, R - 1)]
        else:
            real = t_idx
        return np.asarray(real), np.asarray(v_idx)

    def access(self, e, st, kind, ref: SRef, tids, vals, layout, channel="C:async", group=None, coords=None,
               partial=False, descriptor=False):
        alloc = ref.alloc
        stype = ref.view or (alloc.type.stage() if alloc.type.stages else alloc.type)
        if coords is None:
            # slots were chosen from `layout`; recover their (thread index in layout, value) coordinates
            coords = self._slot_coords(layout, tids, vals, st)
        coords = tuple(np.asarray(c, dtype=np.int64) for c in coords)
        off = np.asarray(stype.offset(coords), dtype=np.int64).ravel() if coords else np.zeros(
            len(tids), dtype=np.int64)
        off = off + ref.origin if ref.origin else off
        stage = ref.stage if ref.stage is not None else 0
        a = Access(next(self._ids), e, e.span, kind, alloc, stage, self.point(st, e.span), np.asarray(tids),
                   np.asarray(vals), off, coords, layout, channel, group, partial, descriptor,
                   alloc.type.dtype.bytes)
        a.frame = ref.frame
        if ref.frame is not None:
            a.window = any(k is None or off or n != dim for (k, off, n), dim in zip(ref.frame, stype_shape(alloc)))
        if self.recording and kind != "tag":
            self.A.accesses.append(a)
        return a

    def _slot_coords(self, layout, tids, vals, st):
        # tids are real thread ids; map back to the layout's thread index
        T = layout.num_threads
        if st.threads is not None and T == len(st.threads) and T != self.T:
            pos = np.searchsorted(st.threads, tids)
        else:
            pos = np.asarray(tids) % T
        return tuple(c[pos, vals] for c in layout.coords)

    def record_write(self, acc: Access, st, tag):
        self.writes.append(WriteRec(acc, acc.point, tag or untagged))

    def read_tag(self, ref: SRef, acc: Access):
        """Tag alternatives of the elements a read of `ref` sees: those of the most recent write to the same
        stage, found among the writes of this iteration, of the previous iterations (up to a window of
        stages + 1) and before the loop."""
        return reaching_tag(self, ref, acc)


class _State:
    def __init__(self, env, counters, path, threads, loops, role):
        self.env, self.counters, self.path, self.threads, self.loops, self.role = (
            env, counters, path, threads, loops, role)
        self.divergent = None
        self.avalid: dict = {}  # arrival counter -> bool term under which its value is exact


def stype_shape(alloc) -> tuple:
    return tuple(alloc.type.shape)


def _bar_name(e) -> str:
    return f"mbar:{e.name}" if isinstance(e, ir.Var) else "mbar:?"


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
