"""CPU interpreter: the reference semantics of the tile language, with GPU memory semantics.

    trace = run_ir(kir, grid, args, record=False, tags=None)

Blocks run one after another; inside a block every op is vectorized over the block's threads with numpy.

Values
------
* uniform scalar: a Python number (loop counters, block ids, constexpr arithmetic).
* per-thread scalar (thread_id/lane_id/warp_id/warpgroup_id and what derives from them): a numpy array of
  shape [num_threads], indexed by the real thread id (also inside role branches).
* register tile: a numpy array in the tile's LOGICAL shape, in the storage dtype of its element type
  (`dtypes.to_storage`; bf16 is float32 rounded to bf16 after every op producing bf16). Which thread holds
  which element is the TVLayout on the expression's type; loads, stores, mma and recording use it.
* global tensor: `TensorBuf`; global tile: `GlobalView` (tensor, starts, sizes, squeeze);
  shared tile: `SharedRef` (allocation, SharedType, stage); mbarrier: `MBarrier` (see interp_memory).

Threads and roles
-----------------
An `If` of kind "role" (or any `If` whose condition is per-thread and not the same for all running
threads) splits the running threads; both branches run as coroutines (generators), round-robin, each
running until it blocks in `mbarrier_wait` on a phase that has not completed. Inside a branch, tile ops are
distributed over that branch's threads: a layout over R threads (R = threads in the branch) numbers them
0..R-1 in increasing real id; a layout over the whole block keeps real ids (only the branch's threads act,
and an element held only by threads outside the branch is an error, since hardware would never move it).
A `barrier()` inside a branch is a deadlock (error); a state where every branch waits is a deadlock (error).
Variables assigned in branches merge at the join: differing scalars become per-thread values; differing
tiles become unusable. Recorded thread ids are always real ids.

Memory model
------------
`copy_async` reads global memory at issue and writes shared memory when a `wait_async(n)` executed by the
issuing thread retires its group (per-thread groups, as cp.async). `copy_bulk` reads at issue and writes
when an `mbarrier_wait` on its mbarrier returns with the phase it was tied to completed. Shared memory
starts as poison (NaN / int max), so reading a stage before its copy landed gives visibly wrong data.
`mbarrier_wait(bar, phase)` waits until more than `phase` phases of `bar` have completed (`phase` is a
running phase count 0, 1, 2, ...; this also serves parity-style code that waits on phase 0 then 1 once).
Out-of-bounds global elements: loads read `other` (0), stores skip them, copies from them write 0.

Modules
-------
This file: the public API, the block driver, statements, control flow and the role scheduler. The ops are
mixins of `_Interpreter`: interp_ops (register values: elementwise, math, casts, reductions, construction),
interp_memops (views, loads/stores, copies, barriers, mbarriers), interp_mma (mma), interp_launch (argument
checks); interp_memory holds the memory state and the recorder.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .errors import InterpreterError, Span, TilepyError
from .interp_gather import _GatherOps
from .interp_launch import _LaunchArgs, _norm_grid
from .interp_memops import _MemoryOps
from .interp_memory import AsyncGroups, Event, MBarrier, Recorder, SharedBuf, thread_ranges
from .interp_mma import _MmaOps
from .interp_ops import I32, _Divergent, _is_scalar_value, _ValueOps
from .interp_tiles import _TileOps
from .ir import Assign, BinOp, Call, Const, Eval, For, If, KernelIR, UnOp, Var
from .ops import UNARY_MATH
from .targets import get_target
from .tv_layout import TVLayout
from .types import ScalarType

__all__ = ["run_ir", "Trace", "TagTracker", "TagInfo"]


# ============================================================================================ public API


@dataclass
class Trace:
    """What a run did. `accesses` is one structured array (interp_memory.ACCESS_DTYPE), empty unless
    record=True; `ops[i]` is the IR node (Call) of op index i (`.span` gives file:line); `iterations[i]` is a
    tuple of (loop variable, value) pairs, outermost first; `shared_allocs[i]` = (name, SharedType) of
    shared allocation i; `buffers[i]` = name of param i; `mbarriers[i]` = name of mbarrier allocation i."""

    accesses: np.ndarray
    ops: list
    iterations: list
    shared_allocs: list
    buffers: list
    events: list
    mbarriers: list
    grid: tuple
    num_threads: int

    def op_index(self, node) -> int:
        """Index of an IR node in `ops` (-1 if it never accessed memory or recorded an event)."""
        return next((i for i, n in enumerate(self.ops) if n is node), -1)

    def of_op(self, node) -> np.ndarray:
        """The access rows of one IR node."""
        return self.accesses[self.accesses["op"] == self.op_index(node)]


@dataclass(frozen=True)
class TagInfo:
    """Where a tag op ran: block coordinates, the real thread ids running it, the loop iteration vector."""

    block: tuple
    threads: np.ndarray
    iteration: tuple


class TagTracker(Protocol):
    """Hook for the verifier: the interpreter calls these with concrete values (tiles in logical shape).
    `on_value` is optional: if present it is called after every Call, BinOp and UnOp with its result.

    Optional data-movement hooks (tests/verify/dynamic_tags.py uses them), each called only if present:
    `on_args(node, args, info)` with a Call's evaluated arguments (a BinOp's/UnOp's operands) before the
    op runs; `on_read(node, src, coords, threads, info)` when an op reads a view at tile coordinates
    (masked-off and out-of-bounds slots included); `on_write(node, dst, coords, threads, offsets, written,
    info)` when a store or copy writes `dst` (`written`: which slots reached memory); `on_pending(node,
    pending, info)` when an async or bulk copy is issued (it may set `pending.tags`, an array parallel to
    `pending.offsets` that follows the copy until it lands); `on_land(pending)` when such a copy lands."""

    def tag(self, node: Call, value: Any, info: TagInfo) -> None: ...

    def assert_tag(self, node: Call, value: Any, info: TagInfo) -> None: ...

    def mma_operands(self, node: Call, acc: Any, info: TagInfo) -> Any: ...


def run_ir(kir: KernelIR, grid, args: list, *, record: bool = False, tags: TagTracker | None = None
           ) -> Trace:
    """Run `kir` on the CPU over `grid` (1 to 3 ints) with `args` in `kir.params` order: global tensors as
    C-contiguous numpy arrays or CPU torch tensors (written in place), run-time scalars as Python numbers."""
    grid = _norm_grid(grid)
    cl = getattr(kir, "cluster", (1, 1, 1))
    if cl != (1, 1, 1):      # the grid is rounded up to whole clusters (as the GPU launch does)
        grid = tuple(-(-g // c) * c for g, c in zip(grid, cl))
    interp = _Interpreter(kir, grid, record, tags)
    writeback = interp.bind(args)
    with np.errstate(all="ignore"):
        if cl == (1, 1, 1):
            for lin in range(grid[0] * grid[1] * grid[2]):
                interp.run_block(lin)
        else:
            for members in _clusters(grid, cl):
                interp.run_cluster(members)
    for fn in writeback:
        fn()
    rec = interp.rec
    return Trace(
        accesses=rec.finish(), ops=rec.ops, iterations=rec.iterations,
        shared_allocs=[(b[0], b[1]) for b in interp.shared_allocs], buffers=[p.name for p in kir.params],
        events=rec.events, mbarriers=list(interp.mbarrier_names), grid=grid, num_threads=kir.num_threads)


def _clusters(grid: tuple, cl: tuple):
    """The linear block indices of each cluster, in rank order (x fastest, then y, z), clusters in grid order."""
    gx, gy, gz = grid
    cx, cy, cz = cl
    for kz in range(gz // cz):
        for ky in range(gy // cy):
            for kx in range(gx // cx):
                yield [(kx * cx + x) + (ky * cy + y) * gx + (kz * cz + z) * gx * gy
                       for z in range(cz) for y in range(cy) for x in range(cx)]


# ============================================================================================ clusters


# the interpreter's per-block state: swapped in and out while the blocks of one cluster run as coroutines
_CTA_STATE = ("block_lin", "block", "interval", "shared", "mbars", "async_", "bulk_stores", "cta_rank")


class _Cta:
    """One block of a running cluster: its state while another block runs, and whether it has exited."""

    __slots__ = (*_CTA_STATE, "exited", "root")

    def __init__(self):
        self.exited = False


class _ClusterBarrier:
    """tp.cluster_sync: generation g completes when every block of the cluster has arrived g + 1 times."""

    __slots__ = ("size", "arrived", "generation")

    def __init__(self, size: int):
        self.size, self.arrived, self.generation = size, 0, 0

    def arrive(self) -> int:
        g = self.generation
        self.arrived += 1
        if self.arrived == self.size:
            self.arrived, self.generation = 0, g + 1
        return g


class _ClusterWait:
    """A block suspended in tp.cluster_sync until every block of its cluster arrived."""

    __slots__ = ("bar", "gen", "span", "ctx")

    def __init__(self, bar: _ClusterBarrier, gen: int, span: Span, ctx):
        self.bar, self.gen, self.span, self.ctx = bar, gen, span, ctx

    def ready(self) -> bool:
        return self.bar.generation > self.gen

    def leaves(self):
        yield self


# ============================================================================================ roles


_MISSING = object()


class _Blocked:
    """Every role of an If is waiting; ready when any of them can go on."""

    __slots__ = ("waits",)

    def __init__(self, waits):
        self.waits = waits

    def ready(self) -> bool:
        return any(w.ready() for w in self.waits)

    def leaves(self):
        for w in self.waits:
            yield from w.leaves()


class _Ctx:
    """An execution context: the threads running (all, or one role) and their variables."""

    __slots__ = ("env", "types", "tids", "active", "full", "iters")

    def __init__(self, env, types, tids, active, full, iters):
        self.env, self.types, self.tids, self.active, self.full, self.iters = env, types, tids, active, full, iters

    def fork(self, mask: np.ndarray) -> _Ctx:
        return _Ctx(dict(self.env), dict(self.types), np.nonzero(mask)[0], mask, False, list(self.iters))


# ============================================================================================ interpreter


class _Interpreter(_LaunchArgs, _ValueOps, _MemoryOps, _MmaOps, _GatherOps, _TileOps):
    """One run of a kernel. The ops are methods of the mixins (interp_launch, interp_ops, interp_memops,
    interp_mma) so that each file stays one responsibility; `_ops` collects every `_op_<name>` of them, and
    `eval` dispatches an IR Call to it by op name."""

    def __init__(self, kir: KernelIR, grid: tuple, record: bool, tracker):
        self.kir = kir
        self.grid = grid
        self.T = int(kir.num_threads)
        self.target = get_target(kir.target)
        self.warp = self.target.warp_size
        self.rec = Recorder(record)
        self.recording = record
        self.tracker = tracker
        hooks = ("on_args", "on_read", "on_write", "on_pending", "on_land")
        self._hooks = {h: getattr(tracker, h, None) for h in hooks} if tracker is not None else dict.fromkeys(hooks)
        self.base_env: dict = {}
        self.base_types: dict = {}
        self.shared_allocs: list = []  # (name, SharedType, node)
        self.shared_index: dict[int, int] = {}
        self.mbarrier_names: list = []
        self.mbarrier_index: dict[int, int] = {}
        self.name_hint = ""
        self.tid = np.arange(self.T, dtype=np.int64)
        self.tid.setflags(write=False)
        self._ops = {name[4:]: getattr(self, name) for name in dir(self) if name.startswith("_op_")}
        for m in UNARY_MATH:
            self._ops[m] = self._math

    # ------------------------------------------------------------------------------------ blocks

    def _start_block(self, lin: int, rank: int = 0) -> _Ctx:
        gx, gy, _ = self.grid
        self.block_lin = lin
        self.block = (lin % gx, (lin // gx) % gy, lin // (gx * gy))
        self.cta_rank = rank
        self.interval = 0
        self.shared: dict[int, SharedBuf] = {}
        self.mbars: dict[int, MBarrier] = {}
        self.async_ = AsyncGroups(self.T)
        self.bulk_stores: list = []  # (issuing thread, shared src, global dst, op, ctx) of unwaited tp.store_bulk
        active = np.ones(self.T, dtype=bool)
        return _Ctx(dict(self.base_env), dict(self.base_types), self.tid, active, True, [])

    def run_block(self, lin: int):
        self.cluster = None
        root = self._start_block(lin)
        for w in self._exec(self.kir.body, root):
            raise self._deadlock(w)
        self._end_block(root)

    def run_cluster(self, lins: list):
        """The blocks of one cluster, as coroutines run round-robin (each until it waits on an mbarrier or at a
        cluster_sync that cannot complete yet): they share multicast copies and remote mbarrier arrivals."""
        ctas, gens = [], []
        self.cluster = ctas
        self.cluster_barrier = _ClusterBarrier(len(lins))
        for rank, lin in enumerate(lins):
            cta = _Cta()
            cta.root = self._start_block(lin, rank)
            gens.append(self._exec(self.kir.body, cta.root))
            self._save(cta)
            ctas.append(cta)
        waits: list = [None] * len(ctas)
        while not all(c.exited for c in ctas):
            progressed = False
            for i, cta in enumerate(ctas):
                if cta.exited or (waits[i] is not None and not waits[i].ready()):
                    continue
                progressed = True
                self._load(cta)
                try:
                    waits[i] = next(gens[i])
                except StopIteration:
                    waits[i] = None
                    self._end_block(cta.root)
                    cta.exited = True
                self._save(cta)
            if not progressed:
                lines = []
                for i, cta in enumerate(ctas):
                    if not cta.exited:
                        lines += [f"block {cta.block} (cluster rank {i}): " + self._describe_wait(leaf)
                                  for leaf in waits[i].leaves()]
                first = next(w for w in waits if w is not None)
                raise InterpreterError("deadlock in a cluster: every block is waiting and none can go on:\n  "
                                       + "\n  ".join(lines), next(iter(first.leaves())).span)
        self.cluster = None

    def _save(self, cta: _Cta):
        for name in _CTA_STATE:
            setattr(cta, name, getattr(self, name))

    def _load(self, cta: _Cta):
        for name in _CTA_STATE:
            setattr(self, name, getattr(cta, name))

    def peer(self, rank: int, span, what: str) -> _Cta:
        """The block of cluster rank `rank` that a remote arrival or a multicast copy reaches."""
        ctas = getattr(self, "cluster", None)
        size = len(ctas) if ctas else 1
        if not 0 <= rank < size:
            raise InterpreterError(f"{what} reaches cluster rank {rank}, outside this cluster of {size} block(s)", span)
        if not ctas:
            return None
        cta = ctas[rank]
        if cta.exited:
            raise InterpreterError(
                f"{what} reaches block {cta.block} (cluster rank {rank}), which has already exited: its shared memory "
                "is gone; end the kernel with tp.cluster_sync() so no block leaves while others still reach it", span)
        return cta

    def _describe_wait(self, leaf) -> str:
        if isinstance(leaf, _ClusterWait):
            return f"{thread_ranges(leaf.ctx.tids)} wait at {leaf.span} in tp.cluster_sync()"
        b = leaf.bar
        return (f"{thread_ranges(leaf.ctx.tids)} wait at {leaf.span} on mbarrier '{b.name}' for phase {leaf.phase} "
                f"({b.completed} phases completed, {b.arrivals}/{b.count} arrivals)")

    def _cluster_sync(self, e: Call, ctx: _Ctx):
        self._op_cluster_sync(e, ctx)
        if getattr(self, "cluster", None):
            bar = self.cluster_barrier
            gen = bar.arrive()
            while bar.generation <= gen:
                yield _ClusterWait(bar, gen, e.span, ctx)

    def _end_block(self, root: _Ctx):
        if self.bulk_stores:
            node = self.bulk_stores[0][3]
            raise InterpreterError(
                f"block {self.block} ends with {len(self.bulk_stores)} tp.store_bulk not waited for: the shared "
                "tile it reads is freed at exit; call tp.store_bulk_wait(src) in the issuing role", node.span)
        if self.async_.pending and self.recording:
            p = self.async_.pending[0]
            self._event("async_unretired", self.rec.ops[p.op], root, value=len(self.async_.pending))

    def _deadlock(self, w) -> InterpreterError:
        lines = [self._describe_wait(leaf) for leaf in w.leaves()]
        first = next(iter(w.leaves()))
        return InterpreterError(
            f"deadlock in block {self.block}: every role is waiting and none can go on:\n  " + "\n  ".join(lines),
            first.span)

    # ------------------------------------------------------------------------------------ statements

    def _exec(self, stmts, ctx: _Ctx):
        for s in stmts:
            if isinstance(s, Assign):
                self.name_hint = s.name
                v = self.eval(s.value, ctx)
                ctx.env[s.name] = v
                ctx.types[s.name] = s.value.type
            elif isinstance(s, Eval):
                c = s.call
                if c.op == "mbarrier_wait":
                    yield from self._mbarrier_wait(c, ctx)
                elif c.op == "cluster_sync":
                    yield from self._cluster_sync(c, ctx)
                else:
                    self.eval(c, ctx)
            elif isinstance(s, For):
                yield from self._for(s, ctx)
            elif isinstance(s, If):
                yield from self._if(s, ctx)
            else:
                raise InterpreterError(f"unknown statement {type(s).__name__}", getattr(s, "span", None))

    def _uniform_int(self, e, ctx, what: str, default=None) -> int:
        if e is None:
            return default
        v = self.eval(e, ctx)
        if isinstance(v, np.ndarray) and v.ndim:
            vals = np.unique(v[ctx.tids])
            if vals.size != 1:
                raise InterpreterError(f"{what} differs between threads ({vals[:4].tolist()}...); it must be "
                                       "uniform", e.span)
            v = vals[0]
        try:
            return operator.index(v)
        except TypeError:
            raise InterpreterError(f"{what} must be an integer, got {v!r}", e.span) from None

    def _for(self, s: For, ctx: _Ctx):
        start = self._uniform_int(s.start, ctx, "loop start", 0)
        stop = self._uniform_int(s.stop, ctx, "loop bound")
        step = self._uniform_int(s.step, ctx, "loop step", 1)
        if step == 0:
            raise InterpreterError("loop step is 0", s.span)
        ctx.types[s.var] = I32
        for i in range(start, stop, step):
            ctx.env[s.var] = i
            ctx.iters.append((s.var, i))
            try:
                yield from self._exec(s.body, ctx)
            finally:
                ctx.iters.pop()

    def _if(self, s: If, ctx: _Ctx):
        c = self.eval(s.cond, ctx)
        if isinstance(c, np.ndarray) and c.ndim:
            if c.shape != (self.T,):
                raise InterpreterError(f"condition must be a scalar (uniform or per-thread), got shape {c.shape}",
                                       s.cond.span)
            cond = c.astype(bool)
            then_m = ctx.active & cond
            else_m = ctx.active & ~cond
            if not else_m.any():
                yield from self._exec(s.then, ctx)
            elif not then_m.any():
                yield from self._exec(s.orelse, ctx)
            else:
                yield from self._roles(s, ctx, then_m, else_m)
            return
        yield from self._exec(s.then if bool(c) else s.orelse, ctx)

    def _roles(self, s: If, ctx: _Ctx, then_m, else_m):
        a, b = ctx.fork(then_m), ctx.fork(else_m)
        gens = [self._exec(s.then, a), self._exec(s.orelse, b)]
        waits: list = [None, None]
        live = [True, True]
        while any(live):
            progressed = False
            for i in (0, 1):
                if not live[i] or (waits[i] is not None and not waits[i].ready()):
                    continue
                progressed = True
                try:
                    waits[i] = next(gens[i])
                except StopIteration:
                    live[i] = False
                    waits[i] = None
            if not progressed:
                yield _Blocked([w for w, lv in zip(waits, live) if lv])
        self._join(ctx, a, b, then_m, s.span)

    def _join(self, ctx: _Ctx, a: _Ctx, b: _Ctx, then_m, span: Span):
        """Merge the roles' variables: per-thread where they differ and are scalars; a variable only one role
        changed takes that role's value; differing tiles become unusable."""
        for k in set(a.env) | set(b.env):
            va, vb, vp = a.env.get(k, _MISSING), b.env.get(k, _MISSING), ctx.env.get(k, _MISSING)
            if va is vb:
                continue
            if va is _MISSING or (va is vp and vb is not _MISSING):
                new, ty = vb, b.types.get(k)
            elif vb is _MISSING or vb is vp:
                new, ty = va, a.types.get(k)
            else:
                ta = a.types.get(k)
                if (isinstance(ta, ScalarType) and (_is_scalar_value(va) or isinstance(va, np.ndarray))
                        and (_is_scalar_value(vb) or isinstance(vb, np.ndarray))):
                    new = np.where(then_m, va, vb)
                    ty = ScalarType(ta.dtype, uniform=False)
                else:
                    new, ty = _Divergent(span), a.types.get(k)
            ctx.env[k] = new
            ctx.types[k] = ty

    # ------------------------------------------------------------------------------------ expressions

    def eval(self, e, ctx: _Ctx):
        if isinstance(e, Var):
            try:
                v = ctx.env[e.name]
            except KeyError:
                raise InterpreterError(f"variable '{e.name}' is read before it is assigned", e.span) from None
            if isinstance(v, _Divergent):
                raise InterpreterError(
                    f"variable '{e.name}' was assigned different values by the roles of the If at {v.span}; it "
                    "cannot be used after the roles join (use it inside the role that computed it)", e.span)
            return v
        if isinstance(e, Const):
            return e.value
        if not isinstance(e, BinOp | UnOp | Call):
            return e  # a literal argument
        try:
            if isinstance(e, Call):
                fn = self._ops.get(e.op)
                if fn is None:
                    raise InterpreterError(f"unknown op '{e.op}'", e.span)
                out = fn(e, ctx)
                if self.tracker is not None and hasattr(self.tracker, "on_value"):
                    self.tracker.on_value(e, out, self._tag_info(ctx))
                return out
            out = self._binop(e, ctx) if isinstance(e, BinOp) else self._unop(e, ctx)
            if self.tracker is not None and hasattr(self.tracker, "on_value"):
                self.tracker.on_value(e, out, self._tag_info(ctx))
            return out
        except TilepyError:
            raise
        except Exception as ex:  # numpy/shape trouble: report it at the op
            what = e.op if isinstance(e, Call | BinOp | UnOp) else type(e).__name__
            raise InterpreterError(f"'{what}' failed: {type(ex).__name__}: {ex}", e.span) from ex

    def _args(self, e: Call, ctx):
        vals = [self.eval(a, ctx) if a is not None else None for a in e.args]
        self._track_args(e, vals, ctx)
        return vals

    def _track_args(self, e, vals, ctx):
        if self._hooks["on_args"] is not None:
            self._hooks["on_args"](e, vals, self._tag_info(ctx))

    def _rec_ctx(self, node, ctx):
        """(op index, iteration index, seq) for recording."""
        return self.rec.op(node), self.rec.iteration(tuple(ctx.iters)), self.rec.next_seq()

    def _event(self, kind, node, ctx, target=None, value=None):
        if self.recording:
            self.rec.events.append(Event(kind, self.block_lin, self.interval, self.rec.op(node),
                                         self.rec.next_seq(), thread_ranges(ctx.tids), target, value))

    def _thread_map(self, layout: TVLayout, ctx: _Ctx, span: Span):
        """Real thread ids of the layout's threads and which of them run (None: all)."""
        n = layout.num_threads
        R = ctx.tids.size
        if n == R:
            return ctx.tids, None
        if n == self.T:
            if ctx.full:
                return self.tid, None
            self._check_role_coverage(layout, ctx, span)
            return self.tid, ctx.active
        if n < R:
            return ctx.tids[:n], None
        raise InterpreterError(f"tile layout {layout} distributes over {n} threads but only {R} threads "
                               f"({thread_ranges(ctx.tids)}) run this op", span)

    def _check_role_coverage(self, layout: TVLayout, ctx: _Ctx, span: Span):
        """A block-wide layout used inside a role: only the role's threads act, as on hardware. If some
        elements are held only by threads outside the role they would silently never be read or written."""
        flat = layout.flat
        held = np.zeros(int(np.prod(layout.tile, dtype=np.int64)), dtype=bool)
        held[flat[ctx.active[: layout.num_threads]].ravel()] = True
        anyone = np.zeros_like(held)
        anyone[flat.ravel()] = True
        if (anyone & ~held).any():
            missing = int((anyone & ~held).sum())
            raise InterpreterError(
                f"tile layout {layout} spreads the tile over all {self.T} threads of the block, but only "
                f"{thread_ranges(ctx.tids)} run this role branch: {missing} elements are held only by threads "
                f"outside the role and would never be loaded or stored; lay the tile out over the role's "
                f"{ctx.tids.size} threads", span)

    # ------------------------------------------------------------------------------------ tags, hints

    def _tag_info(self, ctx) -> TagInfo:
        return TagInfo(self.block, ctx.tids, tuple(ctx.iters))

    def _op_tag(self, e, ctx):
        (x,) = self._args(e, ctx)[:1]
        if self.tracker is not None:
            self.tracker.tag(e, x, self._tag_info(ctx))

    def _op_assert_tag(self, e, ctx):
        (x,) = self._args(e, ctx)[:1]
        if self.tracker is not None:
            self.tracker.assert_tag(e, x, self._tag_info(ctx))

    def _op_mma_operands(self, e, ctx):
        (acc,) = self._args(e, ctx)[:1]
        if self.tracker is not None:
            return self.tracker.mma_operands(e, acc, self._tag_info(ctx))
        return None

    def _op_schedule(self, e, ctx):
        return None
