"""The verifier's event model: the abstract values one walk over a kernel's IR produces (domain.py) and the
events the checks reason about (shared-memory accesses, barriers, async-copy waits, mbarrier arrivals, MMAs,
tag assertions), collected in an `Analysis`.

Uniform scalars are `Sym` expressions over named variables: ``block0..2`` (block ids), ``grid0..2``,
``dim:<name>`` (symbolic tensor dimensions), ``p:<name>`` (integer parameters), one variable per loop
(``k#3``) and its trip count (``trip#3``). Per-thread scalars use ``tid``. Comparisons are bool terms
(see vc.py).

Each event sits at a `Point`: its enclosing loops, its path condition (uniform `if`s), the threads that run
it (role branches), and symbolic counters of what executed before it in the block: ``B`` barriers, ``T``
statements (program order), ``C:async`` committed cp.async groups, ``C:<mbarrier>`` bulk copies. Inside a
loop the counters are affine in the iteration index, so "same barrier interval" is ``B1 == B2`` and
"before" is ``T1 < T2`` for any two iterations — loops are never unrolled.

This module imports nothing else of the verifier but the term language (vc.py): the walker (domain.py), the
modules it delegates to (gathers.py, tile_ops.py, reaching.py) and the checks all import it, never the
walker's module, so the verifier's modules form no import cycle.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from tilepy.symbolic import BinOp, Sym, Var
from tilepy.tv_layout import TVLayout
from tilepy.types import RegType, SharedType, TensorType

from .vc import AND, OR, cmp, const_of, in_range, is_int

UNKNOWN = object()  # a scalar the analysis does not model (floats, data-dependent values)

_fresh = itertools.count()


def fresh(prefix: str) -> Var:
    return Var(f"{prefix}#{next(_fresh)}")


# ------------------------------------------------------------------------------------------------ structures


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
    mwaits: list | None = None  # mbarrier waits of one iteration (known after the first pass; reaching.py)
    derived: list = field(default_factory=list)  # names of fresh variables defined per iteration (min / max)
    periodic: dict = field(default_factory=dict)  # arrival counter -> periodic.summed terms (None: unknown)
    ctr: dict = field(default_factory=dict)  # counters at the top of an iteration (pass 2)

    def index(self):
        """Iteration index n = (k - start) // step."""
        return self.var - self.start if _is_one(self.step) else (self.var - self.start) // self.step

    def constraint(self):
        step_ok = True if _is_one(self.step) else cmp("==", (self.var - self.start) % self.step, 0)
        return AND(in_range(self.var, self.start, self.stop), step_ok, self.trip_def(), *self._rounds())

    def _rounds(self):
        """For a loop over range(0, X * R) with R >= 1 (a flattened persistent loop over a block's slots,
        mbarrier_arrays._flatten: X tiles of R slots): var // R < X, a theorem Z3's nonlinear search need not
        find (the tile of a slot is below the tile count)."""
        s = self.stop
        if not (const_of(self.start) == 0 and _is_one(self.step) and isinstance(s, BinOp) and s.op == "*"):
            return ()
        out = []
        for x, r in ((s.a, s.b), (s.b, s.a)):
            if isinstance(r, BinOp) and r.op == "max" and any((const_of(y) or 0) >= 1 for y in (r.a, r.b)):
                out.append(cmp("<", self.var // r, x))
        return out

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
    # (round loop, S, c): in stage copy c of a ring unrolled by S (mbarrier_arrays), directly in that loop over
    # rounds j: iteration S * j + c of the loop as written (the deadlock check's hops count iterations by it)
    copy: tuple | None = None

    def constraint(self):
        return AND(self.path, *(lp.constraint() for lp in self.loops))

    def instance(self, suffix: str) -> dict:
        """Renaming of this point's loop variables for one instance of it in a query."""
        m = {}
        for lp in self.loops:
            m[lp.var.name] = Var(lp.var.name + suffix)
            m[lp.trip.name] = Var(lp.trip.name + suffix)
            for name in lp.derived:  # per-iteration values with their facts in the path condition
                m[name] = Var(name + suffix)
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
    bulk_store: bool = False  # tp.store_bulk's read of its shared source: from `point` until a wait of its issuer
    elem: object = None  # bulk copy on an mbarrier array's element, walked as written (symbolic_ring.py): its term


@dataclass(eq=False)
class Wait:
    point: Point
    channel: str
    n: int
    span: object
    bar: str | None = None  # mbarrier_wait: the mbarrier and the phase term (None: not modelled)
    phase: object = None
    elem: object = None  # on an mbarrier array's element, walked as written (symbolic_ring.py): its term


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
    elem: object = None  # on an mbarrier array's element, walked as written (symbolic_ring.py): its term


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


# ---------------------------------------------------------------------------------------------------- values


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


# -------------------------------------------------------------------------------------------------- analysis


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
    wait_roles: dict = field(default_factory=dict)  # "mbar:<name>" -> {role: number of mbarrier_wait ops}
    # trip count definitions of every loop walked, the measuring walks' too (their trips occur in the
    # counters' per-iteration costs of enclosing loops)
    trip_facts: dict = field(default_factory=dict)
    global_accesses: list = field(default_factory=list)  # gathers.GAccess: stores, loads, atomics
    tickets: dict = field(default_factory=dict)  # name of an atomic's old value -> gathers.Ticket
    store_values: dict = field(default_factory=dict)  # id(GAccess of a store) -> the stored value
    bulk_waits: list = field(default_factory=list)  # Points of the tp.store_bulk_wait ops (checks/race.py)
    # a walk naming mbarrier array elements by term (symbolic_ring.py): why a ring read is not of the covered form
    symbolic_gaps: list = field(default_factory=list)


# --------------------------------------------------------------------------------------------------- helpers


def arr_key(bar: str, role: tuple) -> str:
    """Counter of the arrivals on `bar` by one role (each executing role's arrive counts once)."""
    return f"A:{bar}|{role!r}"


def intlike(v) -> bool:
    return is_int(v) or isinstance(v, Sym)
