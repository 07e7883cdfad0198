"""The abstract state: one walk over a kernel's IR that turns every value into a symbolic map and every
shared-memory access, barrier, async-copy wait and tag assertion into an event the checks reason about.

Uniform scalars become `Sym` expressions over named variables: ``block0..2`` (block ids), ``grid0..2``,
``dim:<name>`` (symbolic tensor dimensions), ``p:<name>`` (integer parameters), one variable per loop
(``k#3``) and its trip count (``trip#3``). Per-thread scalars use ``tid``. Comparisons are bool terms
(see vc.py).

Each event sits at a `Point`: its enclosing loops, its path condition (uniform `if`s), the threads that run
it (role branches), and symbolic counters of what executed before it in the block: ``B`` barriers, ``T``
statements (program order), ``C:async`` committed cp.async groups, ``C:<mbarrier>`` bulk copies. Inside a
loop the counters are affine in the iteration index, so "same barrier interval" is ``B1 == B2`` and
"before" is ``T1 < T2`` for any two iterations — loops are never unrolled.

Per-thread facts (which thread touches which element of a tile) come from evaluating the layouts on all
(thread, value) slots with numpy: exact and cheap for the few hundred threads of a block. The same layouts
evaluated on `Var`s give the symbolic maps used in counterexamples and in the MMA tag conditions.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from tilepy import ir
from tilepy.instructions import mma_operand_layout
from tilepy.ops import ATOMICS
from tilepy.symbolic import Sym, Var
from tilepy.targets import get_target
from tilepy.tv_layout import TVLayout, blocked
from tilepy.types import RegType, ScalarType, SharedType, TensorType

from . import gathers, tile_ops
from .tagterms import TOP, Alt, product, subst_tag
from .vc import AND, NOT, OR, cmp, in_range, is_int, subst

UNKNOWN = object()  # a scalar the analysis does not model (floats, data-dependent values)

_fresh = itertools.count()


def fresh(prefix: str) -> Var:
    return Var(f"{prefix}#{next(_fresh)}")


# ------------------------------------------------------------------------------------------ structures


@dataclass(eq=False)
class Loop:
    id: int
    name: str
    var: Var
    start: object
    stop: object
    step: object
    trip: Var
    span: object
    stages: int | None
    parent: Loop | None
    cost: dict = field(default_factory=dict)  # counters per iteration
    base: dict = field(default_factory=dict)  # counters at loop entry
    writes: list = field(default_factory=list)  # shared writes of one iteration (from the first pass)

    def index(self):
        """Iteration index n = (k - start) // step."""
        return self.var - self.start if _is_one(self.step) else (self.var - self.start) // self.step

    def constraint(self):
        step_ok = True if _is_one(self.step) else cmp("==", (self.var - self.start) % self.step, 0)
        return AND(in_range(self.var, self.start, self.stop), step_ok, self.trip_def())

    def trip_def(self):
        n = (self.stop - self.start + self.step - 1) // self.step if not _is_one(self.step) else self.stop - self.start
        return OR(AND(cmp(">", self.stop, self.start), cmp("==", self.trip, n)),
                  AND(cmp("<=", self.stop, self.start), cmp("==", self.trip, 0)))


def _is_one(x) -> bool:
    return (is_int(x) and x == 1) or (isinstance(x, Sym) and getattr(x, "value", None) == 1)


@dataclass(eq=False)
class Point:
    loops: tuple
    counters: dict
    path: object
    threads: np.ndarray | None  # real thread ids running it (None: all)
    role: tuple  # ((if id, branch), ...) of enclosing role branches
    span: object

    def constraint(self):
        return AND(self.path, *(lp.constraint() for lp in self.loops))

    def instance(self, suffix: str) -> dict:
        """Renaming of this point's loop variables for one instance of it in a query."""
        m = {}
        for lp in self.loops:
            m[lp.var.name] = Var(lp.var.name + suffix)
            m[lp.trip.name] = Var(lp.trip.name + suffix)
        return m


@dataclass(eq=False)
class SharedAlloc:
    id: int
    name: str
    type: SharedType
    span: object

    @property
    def stages(self) -> int:
        return self.type.stages or 1

    @property
    def stage_elems(self) -> int:
        return int(self.type.stage_elems)


@dataclass(eq=False)
class Access:
    """One shared-memory access op: `kind` read | write | async (cp.async / bulk: written at retirement).
    Slots are parallel arrays: real thread, value index, in-stage element offset, tile coordinates."""

    id: int
    op: object
    span: object
    kind: str
    alloc: SharedAlloc
    stage: object
    point: Point
    thr: np.ndarray
    val: np.ndarray
    off: np.ndarray
    coords: tuple
    layout: TVLayout | None
    channel: str = "C:async"
    group: object = None  # group index (C counter at issue) of an async copy
    partial: bool = False  # masked: some slots may not run
    descriptor: bool = False  # wgmma: read by the hardware through a descriptor (no per-lane pattern)
    eb: int = 4
    uninit: object = False  # bool term: no write reaches this read (set for reads, see reaching.py)
    bar: str | None = None  # bulk copy: its mbarrier
    arr: object = None  # bulk copy: arrivals on `bar` by the issuing role before the issue (see sync.py)
    arr_valid: object = True  # bool term: `arr` is exact
    frame: tuple | None = None  # a view (permute / window): reaching.frame_* maps its coords to the tile's
    window: bool = False  # through a window: only part of the stage


@dataclass(eq=False)
class Wait:
    point: Point
    channel: str
    n: int
    span: object
    bar: str | None = None  # mbarrier_wait: the mbarrier and the phase term (None: not modelled)
    phase: object = None


@dataclass(eq=False)
class Arrive:
    """One mbarrier_arrive op: `index` counts the arrivals on `bar` by the same role before it (exact
    where `valid` holds; see sync.py)."""

    point: Point
    bar: str
    key: str  # the arrival counter's name in Point.counters
    index: object
    valid: object
    span: object


@dataclass(eq=False)
class BarrierEv:
    point: Point
    span: object
    divergent: object = None  # (If node, thread mask then) when under thread-dependent control flow


@dataclass(eq=False)
class WriteRec:
    access: Access
    point: Point
    tag: object  # callable(coords) -> list[Alt]


@dataclass(eq=False)
class MmaContrib:
    op: object
    span: object
    point: Point
    instr: object
    warps: tuple
    shape: tuple  # (M, N, K)
    a: object  # OperandTag
    b: object


@dataclass(eq=False)
class OperandTag:
    tag: object  # callable(coords) -> list[Alt]
    actual: TVLayout | None  # register operand layout (None: shared operand, read by coordinate)
    expected: TVLayout | None


@dataclass(eq=False)
class MmaOp:
    op: object
    span: object
    point: Point
    instr: object
    warps: tuple
    operands: dict  # which -> (type, layout or None)


@dataclass(eq=False)
class Assertion:
    op: object
    span: object
    point: Point
    fn: object
    target: object  # Reg or MmaOps
    message: str
    at: tuple = ()  # `at=` tiles: Regs (or UNKNOWN) whose element values are the predicate's further arguments


# ------------------------------------------------------------------------------------------ values


@dataclass(eq=False)
class Reg:
    type: RegType
    tag: object = None  # callable(coords) -> list[Alt]; None: untagged
    value: object = None  # callable(coords) -> Sym / bool term for int/bool tiles, else None
    pairs: tuple = ()  # MmaContrib accumulated into this tile
    src: object = None  # span of the op that made it
    from_pairs: bool = False  # `tag` is mma_result_tag(pairs): an MMA result's (a, b) products


@dataclass(eq=False)
class MmaOps:
    reg: Reg


@dataclass(eq=False)
class GView:
    param: str
    type: TensorType
    dims: tuple  # Syms/ints
    starts: tuple
    sizes: tuple
    squeeze: tuple
    span: object

    @property
    def shape(self):
        return tuple(n for n, q in zip(self.sizes, self.squeeze) if not q)

    def global_coords(self, coords):
        it = iter(coords)
        return tuple(s if q else s + next(it) for s, q in zip(self.starts, self.squeeze))


@dataclass(eq=False)
class SRef:
    alloc: SharedAlloc
    stage: object  # Sym/int, or None for the whole (multi-stage) allocation
    view: SharedType | None = None  # tp.permute / tp.transpose / a window: the view's stage type
    frame: tuple | None = None  # its coordinates in the allocation's (reaching.frame_*; None: the same)
    origin: int = 0  # a window: element offset of its element 0

    @property
    def shape(self) -> tuple:
        return tuple((self.view or self.alloc.type).shape)


@dataclass(eq=False)
class TensorVal:
    param: str
    type: TensorType


# ------------------------------------------------------------------------------------------ analysis


@dataclass
class Analysis:
    kir: object
    target: object
    num_threads: int
    accesses: list = field(default_factory=list)
    waits: list = field(default_factory=list)
    barriers: list = field(default_factory=list)
    mma_ops: list = field(default_factory=list)
    assertions: list = field(default_factory=list)
    allocs: list = field(default_factory=list)
    loops: list = field(default_factory=list)
    unsupported: list = field(default_factory=list)  # (span, what) the analysis over-approximated
    mbarriers: dict = field(default_factory=dict)  # "mbar:<name>" -> arrival count
    arrives: list = field(default_factory=list)
    arrive_roles: dict = field(default_factory=dict)  # "mbar:<name>" -> set of role tuples of its arrive ops
    wait_nodes: dict = field(default_factory=dict)  # "mbar:<name>" -> number of mbarrier_wait ops on it
    # trip count definitions of every loop walked, the measuring walks' too (their trips occur in the
    # counters' per-iteration costs of enclosing loops)
    trip_facts: dict = field(default_factory=dict)
    global_accesses: list = field(default_factory=list)  # gathers.GAccess: stores, loads, atomics
    store_values: dict = field(default_factory=dict)  # id(GAccess of a store) -> the stored value


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
        from .vc import Solver_

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
        from .sync import prescan

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
        start, stop, step = (fresh("u") if v is UNKNOWN or not _intlike(v) else v for v in (start, stop, step))
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
            env2[name] = _join(v0, v1)
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
                st.env[name] = _join(st.env.get(name), _after_loop(st2.env[name], lp))

    def prefix_closed(self, lp, v) -> bool:
        """Does `v` (a bool term over lp.var) holding at iteration n imply it held at every earlier one?"""
        i = fresh("pc")
        earlier = lp.start + i * lp.step
        q = AND(lp.constraint(), cmp(">=", i, 0), cmp("<", earlier, lp.var), v,
                NOT(subst(v, {lp.var.name: earlier})))
        return self.solve(q) is None

    def branch(self, s: ir.If, st):
        cond = self.scalar(s.cond, st)
        per_thread = "tid" in _names(cond)
        if s.kind == "role" or per_thread:
            mask = self.thread_mask(cond, st)
            rid = id(s)  # stable over both walks of an enclosing loop (sync.py keys arrival counters by role)
            for branch, body, m in ((0, s.then, mask), (1, s.orelse, None if mask is None else ~mask)):
                threads = st.threads if m is None else _intersect(st.threads, np.nonzero(m)[0])
                sub = _State(dict(st.env), st.counters, st.path, threads, st.loops, st.role + ((rid, branch),))
                sub.avalid = st.avalid
                sub.divergent = (s, mask)
                self.block(body, sub)
                for k, v in sub.env.items():
                    if st.env.get(k) is not v:
                        st.env[k] = _join(st.env.get(k), v)
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
            elif _same(a, b):
                st.counters[k] = a
                if k.startswith("A:"):
                    st.avalid[k] = OR(AND(c, va), AND(NOT(c), vb))
            elif k.startswith("A:") and _same(b, before.get(k, 0)):
                # arrivals only on the then path: exact where the condition held (sync.py, loop validity)
                st.counters[k], st.avalid[k] = a, AND(c, va)
            elif k.startswith("A:") and _same(a, before.get(k, 0)):
                st.counters[k], st.avalid[k] = b, AND(NOT(c), vb)
            else:
                st.counters[k] = fresh(f"cnt_{k}")
                if k.startswith("A:"):
                    st.avalid[k] = False
        for k in set(t_state.env) | set(e_state.env):
            a, b = t_state.env.get(k), e_state.env.get(k)
            st.env[k] = a if a is b else _join(a, b)

    def thread_mask(self, cond, st):
        """Which threads take a thread-dependent branch (None when it also depends on unknowns)."""
        from .vc import evaluate_term, term_vars

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
                return NOT(x) if not _intlike(x) else cmp("==", x, 0)
            if e.op == "-" and _intlike(x):
                return 0 - x
            if e.op == "~" and _intlike(x):
                return -1 - x
            return UNKNOWN
        if isinstance(e, ir.Call):
            return self.call(e, st)
        return UNKNOWN

    def binop(self, e, st):
        a, b = self.expr(e.lhs, st), self.expr(e.rhs, st)
        if isinstance(e.type, RegType):
            return self.elementwise(e, [a, b], st)
        return _scalar_op(e.op, a, b)

    # ----------------------------------------------------------------- calls
    def call(self, e: ir.Call, st):
        op = e.op
        m = getattr(self, f"op_{op}", None)
        if m is not None:
            return m(e, st)
        if isinstance(e.type, RegType):
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
        if not (_intlike(a) and _intlike(b)):
            return UNKNOWN
        return (a + b - 1) // b

    def op_min(self, e, st):
        return fresh("min")

    def op_max(self, e, st):
        return fresh("max")

    def op_view(self, e, st):
        base = self.expr(e.args[0], st)
        starts = tuple(self.expr(a, st) for a in e.args[1:])
        starts = tuple(s if _intlike(s) else fresh("start") for s in starts)
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
        from .reaching import frame_of, frame_permute

        ref = self.expr(e.args[0], st)
        dims = tuple(e.attrs["dims"])
        base = ref.view or (ref.alloc.type.stage() if ref.alloc.type.stages else ref.alloc.type)
        frame = frame_permute(ref.frame or frame_of(base.shape), dims)
        return SRef(ref.alloc, ref.stage, base.permute(dims), frame, ref.origin)

    def op_shared_window(self, e, st):
        from .reaching import frame_of, frame_window

        ref = self.expr(e.args[0], st)
        starts, sizes, squeeze = (tuple(e.attrs[k]) for k in ("starts", "sizes", "squeeze"))
        base = ref.view or (ref.alloc.type.stage() if ref.alloc.type.stages else ref.alloc.type)
        wtype, origin = base.window(starts, sizes, squeeze)
        frame = frame_window(ref.frame or frame_of(base.shape), starts, sizes, squeeze)
        return SRef(ref.alloc, ref.stage, wtype, frame, ref.origin + origin)

    def op_stage(self, e, st):
        ref = self.expr(e.args[0], st)
        idx = self.expr(e.args[1], st)
        if not _intlike(idx):
            idx = fresh("stage")
        return SRef(ref.alloc, idx)

    def op_zeros(self, e, st):
        return Reg(e.type, None, (lambda c: 0) if e.type.dtype.is_int else None, (), e.span)

    def op_full(self, e, st):
        v = self.expr(e.args[0], st)
        return Reg(e.type, None, (lambda c, v=v: v) if _intlike(v) or isinstance(v, bool) else None, (), e.span)

    def op_arange(self, e, st):
        return Reg(e.type, None, lambda c: c[0], (), e.span)

    def op_expand_dims(self, e, st):
        x = self.expr(e.args[0], st)
        ax = e.attrs["axis"]

        def drop(c, ax=ax):
            return c[:ax] + c[ax + 1:]

        return Reg(e.type, _compose(x.tag, drop), _compose_v(x.value, drop), x.pairs, x.src)

    def op_convert_layout(self, e, st):
        x = self.expr(e.args[0], st)
        return Reg(e.type, x.tag, x.value, x.pairs, x.src, x.from_pairs)

    def op_cast(self, e, st):
        x = self.expr(e.args[0], st)
        if isinstance(x, Reg):
            return Reg(e.type, x.tag, x.value, x.pairs, x.src, x.from_pairs)
        return x if _intlike(x) and e.type.dtype.is_int else UNKNOWN

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
            if all(isinstance(v, Reg) and v.value is not None or _intlike(v) or isinstance(v, bool) for v in vals):
                op = e.op if isinstance(e, ir.BinOp) else None

                def value(c, op=op):
                    xs = []
                    for v in vals:
                        r, cc = at(v, c)
                        xs.append(r.value(cc) if isinstance(r, Reg) else r)
                    if op is None or len(xs) != 2:
                        return UNKNOWN
                    return _scalar_op(op, xs[0], xs[1])

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

    def op_atomic(self, e, st):
        return gathers.atomic(self, e, st)

    op_atomic_add = op_atomic_max = op_atomic_min = op_atomic_cas = op_atomic

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
            from .tagterms import Unknown, eval_tagfn

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
        key = _arr_key(bar, st.role)
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
        w = Wait(self.point(st, e.span), f"C:{bar}", 0, e.span, bar, phase if _intlike(phase) else None)
        self.mwaits.append(w)
        if self.recording:
            # a completed phase makes the bulk copies tied to it visible to the waiting role (sync.py)
            self.A.waits.append(w)

    def eff_mbarrier_arrive(self, e, st):
        bar = _bar_name(e.args[0])
        key = _arr_key(bar, st.role)
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
                st.env[name] = Reg(x.type, _tagfn_tag(fn, e.span), x.value, x.pairs, x.src)
        elif isinstance(x, SRef):
            n = len(x.alloc.type.shape)
            tids, vals = self.slots(blocked(x.shape, self.T, 1), st, owners=True)
            acc = self.access(e, st, "tag", x if x.stage is not None else SRef(x.alloc, 0), tids, vals, None)
            del n
            self.record_write(acc, st, _tagfn_tag(fn, e.span))

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
                tags[which] = OperandTag(self.read_tag(x, acc) or _untagged, None, None)
            else:
                operands[which] = (xe.type, xe.type.layout)
                exp = mma_operand_layout(instr, which, shape, warps) if instr.operand(which) is not None else None
                tags[which] = OperandTag(x.tag or _untagged, xe.type.layout, exp)
        operands["c"] = (e.args[2].type, e.args[2].type.layout)
        if self.recording:
            self.A.mma_ops.append(MmaOp(e, e.span, pt, instr, warps, operands))
        contrib = MmaContrib(e, e.span, pt, instr, warps, (M, N, K), tags["a"], tags["b"])
        pairs = tuple(p for p in c.pairs if p.op is not e) + (contrib,) if isinstance(c, Reg) else (contrib,)
        prev = c.tag if isinstance(c, Reg) and c.from_pairs else None
        return Reg(e.type, _products_tag(contrib, prev), None, pairs, e.span, True)

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
        self.writes.append(WriteRec(acc, acc.point, tag or _untagged))

    def read_tag(self, ref: SRef, acc: Access):
        """Tag alternatives of the elements a read of `ref` sees: those of the most recent write to the same
        stage, found among the writes of this iteration, of the previous iterations (up to a window of
        stages + 1) and before the loop."""
        from .reaching import reaching_tag

        return reaching_tag(self, ref, acc)


class _State:
    def __init__(self, env, counters, path, threads, loops, role):
        self.env, self.counters, self.path, self.threads, self.loops, self.role = (
            env, counters, path, threads, loops, role)
        self.divergent = None
        self.avalid: dict = {}  # arrival counter -> bool term under which its value is exact


def stype_shape(alloc) -> tuple:
    return tuple(alloc.type.shape)


def _arr_key(bar: str, role: tuple) -> str:
    """Counter of the arrivals on `bar` by one role (each executing role's arrive counts once)."""
    return f"A:{bar}|{role!r}"


def _untagged(c):
    return [Alt(True, None)]


def _tagfn_tag(fn, span):
    from .tagterms import Unknown, eval_tagfn

    def tag(c):
        try:
            return [Alt(True, eval_tagfn(fn, list(c)), span)]
        except Unknown:
            return [Alt(True, TOP, span)]

    return tag


def _compose(tag, f):
    if tag is None:
        return None
    return lambda c: tag(f(c))


def _compose_v(value, f):
    if value is None:
        return None
    return lambda c: value(f(c))


def _intlike(v) -> bool:
    return is_int(v) or isinstance(v, Sym)


def _names(v) -> set:
    from .vc import term_vars

    if v is UNKNOWN or isinstance(v, bool) or v is None or not (isinstance(v, (Sym, tuple)) or is_int(v)):
        return set()
    return term_vars(v)


def _same(a, b) -> bool:
    if is_int(a) and is_int(b):
        return a == b
    return isinstance(a, Sym) and isinstance(b, Sym) and a == b


def _scalar_op(op, a, b):
    if a is UNKNOWN or b is UNKNOWN:
        return UNKNOWN
    boolish = (isinstance(a, bool) or (isinstance(a, tuple) and a and a[0] in ("cmp", "and", "or", "not", "bvar")),
               isinstance(b, bool) or (isinstance(b, tuple) and b and b[0] in ("cmp", "and", "or", "not", "bvar")))
    if op in ("and", "&") and all(boolish):
        return AND(a, b)
    if op in ("or", "|") and all(boolish):
        return OR(a, b)
    if any(boolish):
        if op in ("==", "!=") and all(boolish):
            eq = OR(AND(a, b), AND(NOT(a), NOT(b)))
            return eq if op == "==" else NOT(eq)
        return UNKNOWN
    if not (_intlike(a) and _intlike(b)):
        return UNKNOWN
    if op in ("<", "<=", ">", ">=", "==", "!="):
        return cmp(op, a, b)
    if op in ("+", "-", "*", "//", "%", "^", "&", "|", "<<", ">>"):
        from .vc import const_of

        cb = const_of(b)
        if op in ("//", "%") and (cb is None or cb <= 0):
            return UNKNOWN if cb is not None else fresh("div")
        if op in ("<<", ">>") and (cb is None or cb < 0):
            return fresh("shift")
        import operator

        return {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
                "%": operator.mod, "^": operator.xor, "&": operator.and_, "|": operator.or_,
                "<<": operator.lshift, ">>": operator.rshift}[op](a, b)
    return UNKNOWN


def _bar_name(e) -> str:
    return f"mbar:{e.name}" if isinstance(e, ir.Var) else "mbar:?"


def _intersect(threads, ids):
    if threads is None:
        return ids
    return np.intersect1d(threads, ids)


def _join(a, b):
    """Value of a variable after control flow merges two possible values."""
    if a is b:
        return a
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, Reg) and isinstance(b, Reg):
        pairs = tuple(a.pairs) + tuple(p for p in b.pairs if all(p.op is not q.op for q in a.pairs))
        if pairs and all(r.from_pairs or (r.tag is None and not r.pairs) for r in (a, b)):
            # MMA results (or an untagged initial accumulator): the products of every MMA that produced it
            return Reg(b.type, mma_result_tag(pairs), None, pairs, b.src, True)
        tag = a.tag if a.tag is b.tag else (None if a.tag is None and b.tag is None else _top_tag)
        return Reg(b.type, tag, None, pairs, b.src)
    if _same(a, b):
        return a
    if isinstance(a, (SRef, GView, TensorVal)):
        return b
    return fresh("join")


def _top_tag(c):
    return [Alt(True, TOP)]


def mma_result_tag(pairs):
    """Tag of an MMA result: element (i, j) carries (A tag at (i, r), B tag at (r, j)) for every contraction
    index r of every MMA in `pairs` that accumulated into it, at any of its iterations (each MMA's loop
    variables are fresh, constrained to their ranges). The accumulator's contents before the first of them
    are not part of it. Operands are taken by their logical coordinates (a register operand in another
    layout than the instruction's is an mma_layout error of its own)."""

    def tag(c, pairs=pairs):
        out = []
        for p in pairs:
            m = {}
            for lp in p.point.loops:
                m[lp.var.name], m[lp.trip.name] = fresh(lp.name), fresh("trip")
            out += _products(p, c, m, p.point.constraint())
        return out

    return tag


def _products(p, c, m, where):
    i, j = c
    r = fresh("r")
    where = AND(in_range(r, 0, p.shape[2]), subst(where, m) if m else where)
    out = []
    for alt in product([p.a.tag((i, r)), p.b.tag((r, j))], tuple):
        cond = AND(where, subst(alt.cond, m) if m else alt.cond)
        if cond is not False:
            out.append(Alt(cond, subst_tag(alt.tag, m) if m else alt.tag, alt.src or p.span))
    return out


def _products_tag(contrib, prev):
    """Tag of the result of one MMA where it is computed: its own products at this iteration, then those of
    the MMAs that produced the accumulator it added to (`prev`)."""

    def tag(c, contrib=contrib, prev=prev):
        return _products(contrib, c, {}, True) + (prev(c) if prev is not None else [])

    return tag


def _after_loop(v, lp: Loop):
    """A value computed in a loop body, seen after the loop: its iteration is some valid one."""
    if isinstance(v, Reg) and v.tag is not None:
        inner = v.tag

        def tag(c, inner=inner, lp=lp):
            k = fresh(lp.name)
            m = {lp.var.name: k}
            return [Alt(AND(subst(a.cond, m), subst(lp.constraint(), m)), subst_tag(a.tag, m), a.src)
                    for a in inner(c)]

        return Reg(v.type, tag, None, v.pairs, v.src, v.from_pairs)
    if isinstance(v, Sym) and lp.var in _free(v):
        return fresh("after")
    return v


def _free(v):
    from tilepy.symbolic import free_vars

    return free_vars(v)




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
