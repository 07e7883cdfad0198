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
Casts from float to int truncate toward zero (C); float narrowing rounds to nearest even.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

import numpy as np

from . import dtypes as dt
from .errors import InterpreterError, LaunchError, Span, TilepyError
from .instructions import ALL as ALL_INSTRS
from .instructions import MmaInstr, mma_operand_layout
from .interp_memory import (
    GLOBAL,
    SHARED,
    AsyncGroups,
    Event,
    GlobalView,
    MBarrier,
    PendingCopy,
    Recorder,
    SharedBuf,
    SharedRef,
    TensorBuf,
    check_stage,
    thread_ranges,
)
from .ir import Assign, BinOp, Call, Const, Eval, For, If, KernelIR, UnOp, Var
from .ops import UNARY_MATH
from .targets import get_target
from .tv_layout import TVLayout, blocked
from .types import MBarrierType, RegType, ScalarType, SharedType, TensorType

__all__ = ["run_ir", "Trace", "TagTracker", "TagInfo"]

I32 = ScalarType(dt.i32)


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
    `on_value` is optional: if present it is called after every Call that produces a value."""

    def tag(self, node: Call, value: Any, info: TagInfo) -> None: ...

    def assert_tag(self, node: Call, value: Any, info: TagInfo) -> None: ...

    def mma_operands(self, node: Call, acc: Any, info: TagInfo) -> Any: ...


def run_ir(kir: KernelIR, grid, args: list, *, record: bool = False, tags: TagTracker | None = None
           ) -> Trace:
    """Run `kir` on the CPU over `grid` (1 to 3 ints) with `args` in `kir.params` order: global tensors as
    C-contiguous numpy arrays or CPU torch tensors (written in place), run-time scalars as Python numbers."""
    grid = _norm_grid(grid)
    interp = _Interpreter(kir, grid, record, tags)
    writeback = interp.bind(args)
    with np.errstate(all="ignore"):
        for lin in range(grid[0] * grid[1] * grid[2]):
            interp.run_block(lin)
    for fn in writeback:
        fn()
    rec = interp.rec
    return Trace(
        accesses=rec.finish(), ops=rec.ops, iterations=rec.iterations,
        shared_allocs=[(b[0], b[1]) for b in interp.shared_allocs], buffers=[p.name for p in kir.params],
        events=rec.events, mbarriers=list(interp.mbarrier_names), grid=grid, num_threads=kir.num_threads)


def _norm_grid(grid) -> tuple:
    if isinstance(grid, int | np.integer):
        grid = (int(grid),)
    grid = tuple(int(g) for g in grid)
    if not 1 <= len(grid) <= 3 or any(g < 0 for g in grid):
        raise LaunchError(f"grid must be 1 to 3 non-negative ints, got {grid}")
    return grid + (1,) * (3 - len(grid))


# ============================================================================================ helpers


class _Divergent:
    """A variable the roles of an If assigned differently: not usable after they join."""

    def __init__(self, span: Span):
        self.span = span


_MISSING = object()


class _Wait:
    __slots__ = ("bar", "phase", "span", "ctx")

    def __init__(self, bar: MBarrier, phase: int, span: Span, ctx):
        self.bar, self.phase, self.span, self.ctx = bar, phase, span, ctx

    def ready(self) -> bool:
        return self.bar.completed > self.phase

    def leaves(self):
        yield self


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


@lru_cache(maxsize=512)
def _blocked(shape: tuple, threads: int, vec: int) -> TVLayout:
    return blocked(shape, threads, vec)


@lru_cache(maxsize=512)
def _mma_layout(instr: MmaInstr, which: str, tile: tuple, warps: tuple) -> TVLayout:
    return mma_operand_layout(instr, which, tile, warps)


@lru_cache(maxsize=1024)
def _same_tv(a: TVLayout, b: TVLayout) -> bool:
    if a == b:
        return True
    if tuple(a.tile) != tuple(b.tile) or a.num_threads != b.num_threads or a.num_values != b.num_values:
        return False
    return all(np.array_equal(x, y) for x, y in zip(a.coords, b.coords))


@lru_cache(maxsize=512)
def _owners(layout: TVLayout) -> tuple[np.ndarray, np.ndarray]:
    """(thread, value) slot indices holding each element once: the lowest thread holding it."""
    return _owners_of(layout, None)


@lru_cache(maxsize=512)
def _owner_coords(layout: TVLayout) -> tuple:
    """(thread index per owned slot, tile coordinates per owned slot) of `_owners(layout)`."""
    t_idx, v_idx = _owners(layout)
    coords = tuple(c[t_idx, v_idx] for c in layout.coords)
    for a in (t_idx, *coords):
        a.setflags(write=False)
    return t_idx, coords


def _owners_of(layout: TVLayout, active_slots):
    flat = layout.flat.ravel()
    idx = np.arange(flat.size) if active_slots is None else np.nonzero(active_slots.ravel())[0]
    _, first = np.unique(flat[idx], return_index=True)
    chosen = idx[first]
    return np.divmod(chosen, layout.num_values)


def _at(tile, coords: tuple, shape: tuple):
    """tile[coords] broadcast to `shape` (coords empty for a rank-0 tile)."""
    if not coords:
        return np.broadcast_to(np.asarray(tile), shape)
    return np.asarray(tile)[coords]


def _scatter(shape: tuple, coords: tuple, vals: np.ndarray, fill, dtype) -> np.ndarray:
    out = np.full(shape, fill, dtype=dtype)
    if not coords:
        if vals.size:
            out[()] = vals.ravel()[0]
        return out
    out[coords] = vals
    return out


def _storage(x, dtype: dt.DType) -> np.ndarray:
    return dt.to_storage(x, dtype)


def _scalar(v, dtype: dt.DType | None):
    """A uniform scalar result in the precision of its type, as a Python number."""
    if dtype is None or isinstance(v, _Divergent | TensorBuf | GlobalView | SharedRef | MBarrier):
        return v
    if isinstance(v, np.ndarray) and v.ndim:
        return v
    if dtype.kind == "bool":
        return bool(v)
    if dtype.is_int:
        return int(v)
    if dtype is dt.bf16:
        return float(dt.round_bf16(np.float32(v)))
    return float(np.asarray(v).astype(dtype.np))


def _compute_float(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return x.astype(np.float64) if x.dtype == np.float64 else x.astype(np.float32)


def _erf(x: np.ndarray) -> np.ndarray:
    try:
        import torch

        return torch.special.erf(torch.from_numpy(np.ascontiguousarray(x))).numpy()
    except ImportError:  # Numerical Recipes erfc (fractional error < 1.2e-7)
        z = np.abs(x)
        t = 1.0 / (1.0 + 0.5 * z)
        poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
            -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
                -0.82215223 + t * 0.17087277))))))))
        r = 1.0 - t * np.exp(poly)
        return np.where(x >= 0, r, -r).astype(x.dtype)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


_MATH = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "abs": np.abs, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
    "sigmoid": _sigmoid, "silu": lambda x: x * _sigmoid(x), "erf": _erf,
}
assert set(_MATH) == set(UNARY_MATH)

_ARRAY_BIN = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide, "//": np.floor_divide,
    "%": np.mod, "**": np.power, "&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor,
    "<<": np.left_shift, ">>": np.right_shift, "<": np.less, "<=": np.less_equal, ">": np.greater,
    ">=": np.greater_equal, "==": np.equal, "!=": np.not_equal, "and": np.logical_and, "or": np.logical_or,
}
_SCALAR_BIN = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv,
    "%": operator.mod, "**": operator.pow, "&": operator.and_, "|": operator.or_, "^": operator.xor,
    "<<": operator.lshift, ">>": operator.rshift, "<": operator.lt, "<=": operator.le, ">": operator.gt,
    ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
    "and": lambda a, b: a and b, "or": lambda a, b: a or b,
}
_AXES = {"x": 0, "y": 1, "z": 2}


def _is_scalar_value(v) -> bool:
    return isinstance(v, int | float | bool | np.number | np.bool_)


# ============================================================================================ interpreter


class _Interpreter:
    def __init__(self, kir: KernelIR, grid: tuple, record: bool, tracker):
        self.kir = kir
        self.grid = grid
        self.T = int(kir.num_threads)
        self.target = get_target(kir.target)
        self.warp = self.target.warp_size
        self.rec = Recorder(record)
        self.recording = record
        self.tracker = tracker
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

    # ------------------------------------------------------------------------------------ launch

    def bind(self, args: list) -> list:
        kir = self.kir
        if len(args) != len(kir.params):
            names = ", ".join(p.name for p in kir.params)
            raise LaunchError(f"kernel '{kir.name}' takes {len(kir.params)} arguments ({names}), got {len(args)}")
        dims: dict[str, tuple[int, str]] = {}
        writeback = []
        for i, (p, a) in enumerate(zip(kir.params, args)):
            t = p.type
            if isinstance(t, TensorType):
                arr, wb = self._tensor_arg(p, a)
                if arr.ndim != t.rank:
                    raise LaunchError(
                        f"argument '{p.name}' of kernel '{kir.name}': expected a rank-{t.rank} tensor {t}, got "
                        f"shape {list(arr.shape)}; pass a tensor of shape [{', '.join(map(str, t.shape))}]")
                for d, (want, got) in enumerate(zip(t.shape, arr.shape)):
                    if isinstance(want, str):
                        if want in dims and dims[want][0] != got:
                            n0, who = dims[want]
                            raise LaunchError(
                                f"argument '{p.name}' of kernel '{kir.name}': dimension {d} is '{want}' = {got}, "
                                f"but '{who}' gave '{want}' = {n0}; all tensors must agree on '{want}'")
                        dims.setdefault(want, (int(got), p.name))
                    elif int(want) != got:
                        raise LaunchError(
                            f"argument '{p.name}' of kernel '{kir.name}': dimension {d} must be {want}, got {got} "
                            f"(shape {list(arr.shape)}, expected {t})")
                self.base_env[p.name] = TensorBuf(i, p.name, t.dtype, arr)
                if wb is not None:
                    writeback.append(wb)
            elif isinstance(t, ScalarType):
                self.base_env[p.name] = self._scalar_arg(p, a)
            else:
                self.base_env[p.name] = a
            self.base_types[p.name] = t
        for name, (n, _) in dims.items():
            self.base_env.setdefault(name, n)
            self.base_types.setdefault(name, I32)
        for name, v in (kir.constexprs or {}).items():
            self.base_env.setdefault(name, v)
        return writeback

    def _tensor_arg(self, p, a):
        want = p.type.dtype
        where = f"argument '{p.name}' of kernel '{self.kir.name}'"
        if type(a).__module__.startswith("torch"):
            if getattr(a, "device", None) is not None and a.device.type != "cpu":
                raise LaunchError(f"{where}: the interpreter runs on the CPU; got a tensor on {a.device}; "
                                  "pass tensor.cpu() and copy the result back")
            got = dt.from_any(a.dtype)
            if got != want:
                raise LaunchError(f"{where}: expected dtype {want} ({p.type}), got {a.dtype}; convert with "
                                  f".to(...) before the launch")
            if not a.is_contiguous():
                raise LaunchError(f"{where}: tensor is not contiguous (strides {a.stride()}); pass .contiguous() "
                                  "and read the results from that tensor")
            a = a.detach()
            if got is dt.bf16:
                import torch

                arr = a.to(torch.float32).numpy().copy()

                def wb(t=a, arr=arr):
                    t.copy_(torch.from_numpy(dt.round_bf16(arr)).to(torch.bfloat16))

                return arr, wb
            return a.numpy(), None
        if not isinstance(a, np.ndarray):
            raise LaunchError(f"{where}: expected a tensor {p.type} (numpy array or CPU torch tensor), got "
                              f"{type(a).__name__}")
        got = dt.from_any(a.dtype)
        # numpy has no bf16: float32 arrays stand for bf16 tensors (values rounded to bf16 when stored).
        if got != want and not (want is dt.bf16 and got is dt.f32):
            raise LaunchError(f"{where}: expected dtype {want} ({p.type}), got numpy {a.dtype}; convert with "
                              f".astype({want.storage!r}) before the launch")
        if not a.flags.c_contiguous:
            raise LaunchError(f"{where}: array is not C-contiguous (strides {a.strides}); pass "
                              "np.ascontiguousarray(x) and read the results from that array")
        return a, None

    def _scalar_arg(self, p, a):
        want = p.type.dtype
        where = f"argument '{p.name}' of kernel '{self.kir.name}'"
        if hasattr(a, "item") and getattr(a, "ndim", 0) == 0:
            a = a.item()
        if not _is_scalar_value(a):
            raise LaunchError(f"{where}: expected a scalar {want}, got {type(a).__name__}")
        if want.is_int and not (isinstance(a, int | np.integer) and not isinstance(a, bool)):
            raise LaunchError(f"{where}: expected an integer ({want}), got {a!r}; pass int(...)")
        return _scalar(a, want)

    # ------------------------------------------------------------------------------------ blocks

    def run_block(self, lin: int):
        gx, gy, _ = self.grid
        self.block_lin = lin
        self.block = (lin % gx, (lin // gx) % gy, lin // (gx * gy))
        self.interval = 0
        self.shared: dict[int, SharedBuf] = {}
        self.mbars: dict[int, MBarrier] = {}
        self.async_ = AsyncGroups(self.T)
        active = np.ones(self.T, dtype=bool)
        root = _Ctx(dict(self.base_env), dict(self.base_types), self.tid, active, True, [])
        for w in self._exec(self.kir.body, root):
            raise self._deadlock(w)
        if self.async_.pending and self.recording:
            p = self.async_.pending[0]
            self._event("async_unretired", self.rec.ops[p.op], root, value=len(self.async_.pending))

    def _deadlock(self, w) -> InterpreterError:
        lines = []
        for leaf in w.leaves():
            b = leaf.bar
            lines.append(f"{thread_ranges(leaf.ctx.tids)} wait at {leaf.span} on mbarrier '{b.name}' for phase "
                         f"{leaf.phase} ({b.completed} phases completed, {b.arrivals}/{b.count} arrivals)")
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
            if isinstance(e, BinOp):
                return self._binop(e, ctx)
            return self._unop(e, ctx)
        except TilepyError:
            raise
        except Exception as ex:  # numpy/shape trouble: report it at the op
            what = e.op if isinstance(e, Call | BinOp | UnOp) else type(e).__name__
            raise InterpreterError(f"'{what}' failed: {type(ex).__name__}: {ex}", e.span) from ex

    def _args(self, e: Call, ctx):
        return [self.eval(a, ctx) if a is not None else None for a in e.args]

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

    def _is_pt(self, v, t) -> bool:
        return isinstance(v, np.ndarray) and not isinstance(t, RegType) and v.ndim == 1 and v.shape[0] == self.T

    def _pt_to_tile(self, arr, layout: TVLayout, shape, ctx, span):
        """A per-thread scalar seen as a tile: each element takes the value of the threads holding it."""
        tids, act = self._thread_map(layout, ctx, span)
        vals = np.broadcast_to(arr[tids][:, None], (layout.num_threads, layout.num_values))
        coords = layout.coords
        out = _scatter(tuple(shape), coords, vals, 0, arr.dtype)
        back = _at(out, coords, vals.shape)
        bad = back != vals
        if act is not None:
            bad &= act[:, None]
        if bad.any():
            raise InterpreterError("a per-thread value combined with a tile differs between threads holding the "
                                   "same element; this is not representable as a tile", span)
        return out

    def _tile_operand(self, v, t, layout, shape, ctx, span):
        if self._is_pt(v, t):
            if layout is None:
                raise InterpreterError("per-thread value used in a tile op without a layout", span)
            return self._pt_to_tile(v, layout, shape, ctx, span)
        return v

    def _elementwise(self, fn, vals, types, out_type, ctx, span):
        if isinstance(out_type, RegType) or any(isinstance(t, RegType) for t in types):
            if isinstance(out_type, RegType):
                layout, shape, odt = out_type.layout, tuple(out_type.shape), out_type.dtype
            else:
                rt = next(t for t in types if isinstance(t, RegType))
                layout, shape, odt = rt.layout, tuple(rt.shape), getattr(out_type, "dtype", rt.dtype)
            vals = [self._tile_operand(v, t, layout, shape, ctx, span) for v, t in zip(vals, types)]
            r = np.asarray(fn(*vals))
            if r.shape != shape:
                r = np.broadcast_to(r, shape)
            return _storage(r, odt)
        odt = getattr(out_type, "dtype", None)
        if any(isinstance(v, np.ndarray) for v in vals):
            r = np.asarray(fn(*[np.asarray(v) for v in vals]))
            return _storage(r, odt) if odt is not None else r
        return _scalar(fn(*vals), odt)

    def _binop(self, e: BinOp, ctx):
        a, b = self.eval(e.lhs, ctx), self.eval(e.rhs, ctx)
        arrays = isinstance(a, np.ndarray) or isinstance(b, np.ndarray)
        fn = _ARRAY_BIN.get(e.op) if arrays else _SCALAR_BIN.get(e.op)
        if fn is None:
            raise InterpreterError(f"unknown operator '{e.op}'", e.span)
        if arrays and e.op in ("&", "|", "^") and (np.asarray(a).dtype == bool or np.asarray(b).dtype == bool):
            fn = {"&": np.logical_and, "|": np.logical_or, "^": np.logical_xor}[e.op]
        return self._elementwise(fn, [a, b], [e.lhs.type, e.rhs.type], e.type, ctx, e.span)

    def _unop(self, e: UnOp, ctx):
        x = self.eval(e.operand, ctx)
        if isinstance(x, np.ndarray):
            fn = {"-": np.negative, "not": np.logical_not,
                  "~": np.logical_not if x.dtype == bool else np.invert, "+": np.positive}.get(e.op)
        else:
            fn = {"-": operator.neg, "not": operator.not_, "~": operator.invert, "+": operator.pos}.get(e.op)
        if fn is None:
            raise InterpreterError(f"unknown operator '{e.op}'", e.span)
        return self._elementwise(fn, [x], [e.operand.type], e.type, ctx, e.span)

    # ------------------------------------------------------------------------------------ ids and sizes

    def _op_block_id(self, e, ctx):
        return self.block[self._axis(e)]

    def _op_num_blocks(self, e, ctx):
        return self.grid[self._axis(e)]

    @staticmethod
    def _axis(e) -> int:
        ax = e.attrs.get("axis", 0)
        return _AXES.get(ax, ax) if isinstance(ax, str) else int(ax)

    def _op_thread_id(self, e, ctx):
        return self.tid

    def _op_lane_id(self, e, ctx):
        return self.tid % self.warp

    def _op_warp_id(self, e, ctx):
        return self.tid // self.warp

    def _op_warpgroup_id(self, e, ctx):
        return self.tid // (4 * self.warp)

    def _op_dim(self, e, ctx):
        (t,) = self._args(e, ctx)
        ax = int(e.attrs.get("axis", 0))
        if isinstance(t, TensorBuf):
            return t.shape[ax]
        if isinstance(t, GlobalView | SharedRef):
            return t.shape[ax]
        raise InterpreterError(f"dim() needs a tensor, got {type(t).__name__}", e.span)

    def _scalar2(self, e, ctx, fn_scalar, fn_array):
        a, b = self._args(e, ctx)
        fn = fn_array if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else fn_scalar
        return self._elementwise(fn, [a, b], [x.type for x in e.args], e.type, ctx, e.span)

    def _op_cdiv(self, e, ctx):
        return self._scalar2(e, ctx, lambda a, b: -(-a // b), lambda a, b: -np.floor_divide(-a, b))

    def _op_min(self, e, ctx):
        return self._scalar2(e, ctx, min, np.minimum)

    def _op_max(self, e, ctx):
        return self._scalar2(e, ctx, max, np.maximum)

    # ------------------------------------------------------------------------------------ tiles

    def _op_view(self, e, ctx):
        args = self._args(e, ctx)
        t, starts = args[0], list(args[1:])
        sizes = tuple(e.attrs.get("sizes", ()))
        if isinstance(t, GlobalView):  # a view of a view: starts/sizes/squeeze over the parent's tile dims
            parent = t
            t = parent.buf
            keep = [d for d in range(len(t.shape)) if not parent.squeeze[d]]
            sq_in = tuple(e.attrs.get("squeeze") or (False,) * len(keep))
            full_st, full_sz, full_sq = list(parent.starts), list(parent.sizes), list(parent.squeeze)
            if len(starts) != len(keep):
                raise InterpreterError(f"view of a {len(keep)}-d tile takes {len(keep)} starts, got {len(starts)}",
                                       e.span)
            sizes = self._norm_sizes(sizes, sq_in, e.span)
            for j, d in enumerate(keep):
                full_st[d] = full_st[d] + starts[j]
                full_sz[d] = sizes[j]
                full_sq[d] = sq_in[j]
            return GlobalView(t, tuple(full_st), tuple(full_sz), tuple(full_sq))
        if not isinstance(t, TensorBuf):
            raise InterpreterError(f"view() needs a global tensor, got {type(t).__name__}", e.span)
        rank = len(t.shape)
        squeeze = tuple(bool(x) for x in (e.attrs.get("squeeze") or (False,) * rank))
        if len(starts) != rank or len(squeeze) != rank:
            raise InterpreterError(f"view of '{t.name}' (rank {rank}) takes {rank} starts, got {len(starts)}", e.span)
        sizes = self._norm_sizes(sizes, squeeze, e.span)
        starts = tuple(int(s) if isinstance(s, int | np.integer) else s for s in starts)
        return GlobalView(t, starts, sizes, squeeze)

    @staticmethod
    def _norm_sizes(sizes, squeeze, span):
        kept = sum(1 for s in squeeze if not s)
        if len(sizes) == len(squeeze):
            return tuple(1 if sq else int(n) for n, sq in zip(sizes, squeeze))
        if len(sizes) == kept:
            it = iter(sizes)
            return tuple(1 if sq else int(next(it)) for sq in squeeze)
        raise InterpreterError(f"view sizes {sizes} do not match squeeze {squeeze}", span)

    def _op_shared(self, e, ctx):
        buf = self.shared.get(id(e))
        if buf is None:
            st = e.attrs.get("type") or e.type
            if not isinstance(st, SharedType):
                raise InterpreterError("shared() needs attrs{type: SharedType}", e.span)
            idx = self.shared_index.get(id(e))
            if idx is None:
                idx = self.shared_index[id(e)] = len(self.shared_allocs)
                self.shared_allocs.append((self.name_hint or f"shared{idx}", st, e))
            buf = self.shared[id(e)] = SharedBuf(idx, self.shared_allocs[idx][0], st)
        return SharedRef(buf, buf.type.stage() if buf.type.stages else buf.type, None)

    def _op_stage(self, e, ctx):
        s, i = self._args(e, ctx)
        if not isinstance(s, SharedRef):
            raise InterpreterError(f"stage() needs a shared tile, got {type(s).__name__}", e.span)
        return SharedRef(s.buf, s.type, check_stage(s.buf, i, e.span))

    def _op_zeros(self, e, ctx):
        dtype = e.attrs.get("dtype") or e.type.dtype
        shape = tuple(e.attrs.get("shape") or e.type.shape)
        return np.zeros(shape, dtype=dtype.np)

    def _op_full(self, e, ctx):
        (v,) = self._args(e, ctx)
        dtype = e.attrs.get("dtype") or e.type.dtype
        shape = tuple(e.attrs.get("shape") or e.type.shape)
        if self._is_pt(v, e.args[0].type):
            layout = e.type.layout if isinstance(e.type, RegType) else e.attrs.get("layout")
            return _storage(self._pt_to_tile(v, layout, shape, ctx, e.span), dtype)
        return _storage(np.broadcast_to(np.asarray(v), shape), dtype)

    def _op_arange(self, e, ctx):
        n = int(e.attrs.get("n") or e.type.shape[0])
        dtype = e.type.dtype if isinstance(e.type, RegType) else dt.i32
        return np.arange(n).astype(dtype.np)

    def _op_expand_dims(self, e, ctx):
        (x,) = self._args(e, ctx)
        return np.expand_dims(x, int(e.attrs.get("axis", 0)))

    def _op_convert_layout(self, e, ctx):
        (x,) = self._args(e, ctx)
        return x

    # ------------------------------------------------------------------------------------ memory

    def _gather(self, src, coords, thr, valid, node, ctx, span, tv=None):
        """Read `src` at tile coordinates `coords` (arrays of one shape S) by threads `thr` (broadcastable to
        S); `valid` (bool, S, or None) masks the reads. Returns (values in src storage, read mask)."""
        shape = np.broadcast_shapes(*(c.shape for c in coords), np.shape(thr)) if coords else np.shape(thr)
        if isinstance(src, GlobalView):
            off, ok = src.locate(coords, thr)
            if valid is not None:
                ok = ok & valid
            buf, space, bi = src.buf.flat, GLOBAL, src.buf.index
        elif isinstance(src, SharedRef):
            off = src.offsets(span=span, tv=tv) if tv is not None else src.offsets(coords, span)
            ok = np.ones(shape, dtype=bool) if valid is None else np.broadcast_to(valid, shape)
            buf, space, bi = src.buf.array, SHARED, src.buf.index
        else:
            raise InterpreterError(f"expected a global or shared tile, got {type(src).__name__}", span)
        off = np.broadcast_to(off, shape)
        vals = np.zeros(shape, dtype=buf.dtype)
        vals[ok] = buf[off[ok]]
        if self.recording:
            op, it, seq = self._rec_ctx(node, ctx)
            self.rec.add(block=self.block_lin, thread=np.broadcast_to(thr, shape)[ok], space=space, buffer=bi,
                         offset=off[ok], nbytes=src.dtype.bytes, write=False, interval=self.interval,
                         interval_end=self.interval, op=op, iteration=it, seq=seq)
        return vals, ok

    def _scatter_write(self, dst, coords, thr, vals, ok, node, ctx, span):
        """Write `vals` to `dst` at `coords` (1-D arrays of chosen slots) by threads `thr`, where `ok`."""
        n = thr.shape[0]
        if isinstance(dst, GlobalView):
            off, inb = dst.locate(coords, thr)
            w = inb if ok is None else inb & ok
            buf, space, bi = dst.buf.flat, GLOBAL, dst.buf.index
        elif isinstance(dst, SharedRef):
            off = dst.offsets(coords, span)
            w = np.ones(n, dtype=bool) if ok is None else ok
            buf, space, bi = dst.buf.array, SHARED, dst.buf.index
        else:
            raise InterpreterError(f"cannot write to {type(dst).__name__}; expected a global or shared tile", span)
        off = np.broadcast_to(off, (n,))
        buf[off[w]] = _storage(np.asarray(vals)[w], dst.dtype)
        if self.recording:
            op, it, seq = self._rec_ctx(node, ctx)
            self.rec.add(block=self.block_lin, thread=thr[w], space=space, buffer=bi, offset=off[w],
                         nbytes=dst.dtype.bytes, write=True, interval=self.interval, interval_end=self.interval,
                         op=op, iteration=it, seq=seq)

    def _op_load(self, e, ctx):
        args = self._args(e, ctx)
        src = args[0]
        i_mask, i_other = self._load_arg_positions(e)
        mask = args[i_mask] if i_mask is not None and i_mask < len(args) else None
        other = args[i_other] if i_other is not None and i_other < len(args) else None
        if not isinstance(src, GlobalView | SharedRef):
            raise InterpreterError(f"load() needs a global or shared tile, got {type(src).__name__}", e.span)
        if isinstance(e.type, RegType):
            dtype, shape, layout = e.type.dtype, tuple(e.type.shape), e.type.layout
        else:
            dtype, shape, layout = src.dtype, tuple(src.shape), None
        layout = layout or e.attrs.get("layout") or self._default_layout(shape, ctx, src.dtype)
        if tuple(src.shape) != shape:
            raise InterpreterError(f"load of a {list(src.shape)} tile into a {list(shape)} register tile", e.span)
        tids, act = self._thread_map(layout, ctx, e.span)
        coords = layout.coords
        TV = (layout.num_threads, layout.num_values)
        valid = None if act is None else np.broadcast_to(act[:, None], TV)
        if mask is not None:
            m = self._tile_operand(mask, e.args[i_mask].type, layout, shape, ctx, e.span)
            m = _at(np.broadcast_to(np.asarray(m, dtype=bool), shape), coords, TV)
            valid = m if valid is None else valid & m
        vals, ok = self._gather(src, coords, tids[:, None], valid, e, ctx, e.span, tv=layout)
        fill = 0 if other is None else other
        if other is not None and (isinstance(other, np.ndarray) and other.ndim):
            o = self._tile_operand(other, e.args[i_other].type, layout, shape, ctx, e.span)
            fill_slots = _at(np.broadcast_to(o, shape), coords, TV)
            base = np.broadcast_to(o, shape)
        else:
            fill_slots, base = fill, np.broadcast_to(np.asarray(fill), shape)
        slots = np.where(ok, _storage(vals, dtype), _storage(fill_slots, dtype))
        out = _storage(base, dtype).copy()
        if coords:
            out[coords] = slots
        else:
            out[()] = slots.ravel()[0]
        if src.per_thread if isinstance(src, GlobalView) else False:
            back = _at(out, coords, TV)
            bad = (back != slots) & ~(np.isnan(back) & np.isnan(slots)) if dtype.is_float else back != slots
            if act is not None:
                bad &= act[:, None]
            if bad.any():
                raise InterpreterError("threads holding the same element of the loaded tile read different "
                                       "addresses (per-thread view starts); give each thread its own elements "
                                       "in the layout", e.span)
        return out

    @staticmethod
    def _load_arg_positions(e) -> tuple:
        """(mask index, other index) among load's args. The front end writes load(src, other, [mask]) with
        attrs{masked}; the catalogue's order load(src, [mask], [other]) is used when `masked` is absent."""
        if "masked" in e.attrs:
            return (2 if e.attrs["masked"] else None), 1
        return 1, 2

    def _default_layout(self, shape, ctx, dtype):
        return _blocked(tuple(shape), int(ctx.tids.size), max(16 // dtype.bytes, 1))

    def _op_store(self, e, ctx):
        args = self._args(e, ctx)
        dst, val = args[0], args[1]
        mask = args[2] if len(args) > 2 else None
        if not isinstance(dst, GlobalView | SharedRef):
            raise InterpreterError(f"store() needs a global or shared tile, got {type(dst).__name__}", e.span)
        shape = tuple(dst.shape)
        vt = e.args[1].type
        if isinstance(vt, RegType) and tuple(vt.shape) == shape and vt.layout is not None:
            layout, tile = vt.layout, val
        else:
            layout = self._default_layout(shape, ctx, dst.dtype)
            tile = np.broadcast_to(self._tile_operand(val, vt, layout, shape, ctx, e.span), shape)
        tids, act = self._thread_map(layout, ctx, e.span)
        if act is None:
            t_idx, v_idx = _owners(layout)
        else:
            t_idx, v_idx = _owners_of(layout, np.broadcast_to(act[:, None], (layout.num_threads, layout.num_values)))
        coords = tuple(c[t_idx, v_idx] for c in layout.coords)
        vals = _at(tile, coords, t_idx.shape) if coords else np.broadcast_to(np.asarray(tile), t_idx.shape)
        ok = None
        if mask is not None:
            m = self._tile_operand(mask, e.args[2].type, layout, shape, ctx, e.span)
            ok = np.asarray(_at(np.broadcast_to(np.asarray(m, dtype=bool), shape), coords, t_idx.shape))
        self._scatter_write(dst, coords, tids[t_idx], vals, ok, e, ctx, e.span)

    def _copy_slots(self, src, dst, ctx, span):
        if tuple(src.shape) != tuple(dst.shape):
            raise InterpreterError(f"copy between tiles of different shapes {list(src.shape)} and "
                                   f"{list(dst.shape)}", span)
        layout = self._default_layout(tuple(src.shape), ctx, src.dtype)
        t_idx, coords = _owner_coords(layout)
        return coords, ctx.tids[t_idx]

    def _op_copy(self, e, ctx):
        src, dst = self._args(e, ctx)[:2]
        coords, thr = self._copy_slots(src, dst, ctx, e.span)
        vals, _ = self._gather(src, coords, thr, None, e, ctx, e.span)  # out of bounds: 0
        self._scatter_write(dst, coords, thr, vals, None, e, ctx, e.span)

    def _op_copy_async(self, e, ctx):
        src, dst = self._args(e, ctx)[:2]
        if not isinstance(src, GlobalView) or not isinstance(dst, SharedRef):
            raise InterpreterError("copy_async copies a global tile into a shared tile", e.span)
        coords, thr = self._copy_slots(src, dst, ctx, e.span)
        vals, _ = self._gather(src, coords, thr, None, e, ctx, e.span)
        off = np.broadcast_to(dst.offsets(coords, e.span), thr.shape)
        op, it, seq = self._rec_ctx(e, ctx) if self.recording else (0, 0, 0)
        self.async_.pending.append(PendingCopy(dst.buf, off, _storage(vals, dst.dtype), thr, op, it,
                                               self.interval, seq, groups=self.async_.committed[thr]))

    def _op_commit_async(self, e, ctx):
        self.async_.committed[ctx.tids] += 1
        self._event("commit_async", e, ctx)

    def _op_wait_async(self, e, ctx):
        n = e.attrs.get("n", 0)
        if not isinstance(n, int):
            n = self._uniform_int(n, ctx, "wait_async count") if n is not None else 0
        for p in self.async_.retire(ctx.active, int(n)):
            self._land(p)
        self._event("wait_async", e, ctx, value=int(n))

    def _land(self, p: PendingCopy):
        p.buf.array[p.offsets] = p.values
        if self.recording:
            self.rec.add(block=self.block_lin, thread=p.threads, space=SHARED, buffer=p.buf.index, offset=p.offsets,
                         nbytes=p.buf.type.dtype.bytes, write=True, interval=p.interval,
                         interval_end=self.interval, op=p.op, iteration=p.iteration, seq=p.seq)

    def _op_copy_bulk(self, e, ctx):
        src, dst, bar = self._args(e, ctx)[:3]
        if not isinstance(src, GlobalView) or not isinstance(dst, SharedRef) or not isinstance(bar, MBarrier):
            raise InterpreterError("copy_bulk(src, dst, mbarrier) copies a global tile into a shared tile", e.span)
        if tuple(src.shape) != tuple(dst.shape):
            raise InterpreterError(f"copy_bulk between tiles of different shapes {list(src.shape)} and "
                                   f"{list(dst.shape)}", e.span)
        shape = tuple(src.shape)
        coords = tuple(c.ravel() for c in np.indices(shape, dtype=np.int64)) if shape else ()
        issuer = ctx.tids[:1]
        thr = np.broadcast_to(issuer, coords[0].shape if coords else (1,))
        vals, _ = self._gather(src, coords, thr, None, e, ctx, e.span)
        off = np.broadcast_to(dst.offsets(coords, e.span), thr.shape)
        op, it, seq = self._rec_ctx(e, ctx) if self.recording else (0, 0, 0)
        bar.pending.append(PendingCopy(dst.buf, off, _storage(vals, dst.dtype), np.array(thr), op, it,
                                       self.interval, seq, phase=bar.completed))
        self._event("copy_bulk", e, ctx, target=bar.index, value=bar.completed)

    def _op_barrier(self, e, ctx):
        if not ctx.full:
            raise InterpreterError(
                f"barrier() inside a role branch ({thread_ranges(ctx.tids)}): the other threads never reach it, "
                "which deadlocks on hardware; synchronize roles with mbarriers instead", e.span)
        self.interval += 1
        self._event("barrier", e, ctx)

    def _op_mbarrier(self, e, ctx):
        bar = self.mbars.get(id(e))
        if bar is None:
            count = e.attrs.get("count")
            if count is None:
                count = e.type.count if isinstance(e.type, MBarrierType) else 1
            idx = self.mbarrier_index.get(id(e))
            if idx is None:
                idx = self.mbarrier_index[id(e)] = len(self.mbarrier_names)
                self.mbarrier_names.append(self.name_hint or f"mbarrier{idx}")
            bar = self.mbars[id(e)] = MBarrier(idx, self.mbarrier_names[idx], int(count))
        return bar

    def _op_mbarrier_arrive(self, e, ctx):
        (bar,) = self._args(e, ctx)[:1]
        if not isinstance(bar, MBarrier):
            raise InterpreterError(f"mbarrier_arrive needs an mbarrier, got {type(bar).__name__}", e.span)
        done = bar.arrive()
        self._event("mbarrier_arrive", e, ctx, target=bar.index, value=bar.completed)
        if done:
            self._event("mbarrier_complete", e, ctx, target=bar.index, value=bar.completed)

    def _mbarrier_wait(self, e: Call, ctx):
        try:
            bar, phase = self._args(e, ctx)[:2]
        except TilepyError:
            raise
        except Exception as ex:
            raise InterpreterError(f"mbarrier_wait: {ex}", e.span) from ex
        if not isinstance(bar, MBarrier):
            raise InterpreterError(f"mbarrier_wait needs an mbarrier, got {type(bar).__name__}", e.span)
        phase = self._uniform_int(e.args[1], ctx, "mbarrier phase") if isinstance(phase, np.ndarray) else int(phase)
        while bar.completed <= phase:
            yield _Wait(bar, phase, e.span, ctx)
        if bar.pending:
            keep = []
            for p in bar.pending:
                if p.phase < bar.completed:
                    self._land(p)
                else:
                    keep.append(p)
            bar.pending = keep
        self._event("mbarrier_wait", e, ctx, target=bar.index, value=phase)

    # ------------------------------------------------------------------------------------ math

    def _op_cast(self, e, ctx):
        (x,) = self._args(e, ctx)
        dtype = e.attrs.get("dtype") or e.type.dtype
        if isinstance(x, np.ndarray):
            if dtype.kind == "bool":
                return x != 0
            return _storage(x, dtype)
        return _scalar(x, dtype)

    def _op_where(self, e, ctx):
        c, a, b = self._args(e, ctx)
        return self._elementwise(lambda c, a, b: np.where(np.asarray(c, dtype=bool), a, b), [c, a, b],
                                 [x.type for x in e.args], e.type, ctx, e.span)

    def _op_maximum(self, e, ctx):
        a, b = self._args(e, ctx)
        return self._elementwise(np.maximum, [a, b], [x.type for x in e.args], e.type, ctx, e.span)

    def _op_minimum(self, e, ctx):
        a, b = self._args(e, ctx)
        return self._elementwise(np.minimum, [a, b], [x.type for x in e.args], e.type, ctx, e.span)

    def _math(self, e, ctx):
        (x,) = self._args(e, ctx)
        fn = _MATH[e.op]
        if e.op == "abs" and np.asarray(x).dtype.kind in "iub":
            return self._elementwise(np.abs, [x], [e.args[0].type], e.type, ctx, e.span)
        return self._elementwise(lambda v: fn(_compute_float(v)), [x], [e.args[0].type], e.type, ctx, e.span)

    def _reduce(self, e, ctx, fn):
        (x,) = self._args(e, ctx)
        axis = e.attrs.get("axis")
        keepdims = bool(e.attrs.get("keepdims", False))
        x = np.asarray(x)
        odt = e.type.dtype if hasattr(e.type, "dtype") else None
        if x.dtype.kind == "f":
            x = _compute_float(x)
        r = fn(x, axis=axis, keepdims=keepdims)
        if isinstance(e.type, ScalarType):
            return _scalar(r, odt)
        return _storage(r, odt) if odt is not None else r

    def _op_sum(self, e, ctx):
        return self._reduce(e, ctx, np.sum)

    def _op_max_reduce(self, e, ctx):
        return self._reduce(e, ctx, np.max)

    def _op_min_reduce(self, e, ctx):
        return self._reduce(e, ctx, np.min)

    # ------------------------------------------------------------------------------------ mma

    def _op_mma(self, e, ctx):
        a, b, acc = self._args(e, ctx)[:3]
        ta, tb, tc = (x.type for x in e.args[:3])
        instr = e.attrs.get("instr")
        if isinstance(instr, str):
            instr = ALL_INSTRS[instr if "." in instr else next(k for k in ALL_INSTRS if k.endswith("." + instr))]
        if not isinstance(instr, MmaInstr):
            raise InterpreterError("mma needs attrs{instr: MmaInstr}", e.span)
        if not isinstance(tc, RegType):
            raise InterpreterError(f"mma accumulator must be a register tile, got {tc}", e.span)
        M, N = tc.shape
        K = (a.shape if isinstance(a, SharedRef) else np.shape(a))[1]
        warps = tuple(e.attrs["warps"]) if e.attrs.get("warps") else self._mma_warps(instr, tc.layout, e.span)
        try:
            Lc = _mma_layout(instr, "c", (M, N), warps)
        except ValueError as ex:
            raise InterpreterError(str(ex), e.span) from None
        tids, act = self._thread_map(Lc, ctx, e.span)
        A = self._mma_operand(instr, "a", a, ta, (M, K), warps, tids, act, e, ctx)
        B = self._mma_operand(instr, "b", b, tb, (K, N), warps, tids, act, e, ctx)
        C = self._reg_operand(instr, "c", np.asarray(acc, dtype=np.float32), tc.layout, Lc, e)
        rt = e.type if isinstance(e.type, RegType) else tc
        Lr = rt.layout or Lc
        if A[0] == "full" and B[0] == "full" and C[0] == "full" and _same_tv(Lr, Lc):
            res = C[1] + A[1] @ B[1]
        else:
            if (Lr.num_threads, Lr.num_values) != (Lc.num_threads, Lc.num_values):
                raise InterpreterError(f"mma result layout {Lr} has a different thread/value shape than "
                                       f"{instr.name}'s accumulator layout {Lc}", e.span)
            Tf = instr.threads
            regs = np.empty((Lc.num_threads, Lc.num_values), dtype=np.float32)
            for g in range(warps[0] * warps[1]):
                sl = slice(g * Tf, (g + 1) * Tf)
                Dg = self._group_matrix(C, sl, (M, N)) + self._group_matrix(A, sl, (M, K)) @ self._group_matrix(
                    B, sl, (K, N))
                regs[sl] = Dg[tuple(c[sl] for c in Lc.coords)]
            res = _scatter((M, N), Lr.coords, regs, 0, np.float32)
        return _storage(res, rt.dtype)

    def _mma_warps(self, instr: MmaInstr, Lacc: TVLayout, span) -> tuple:
        n = Lacc.num_threads if Lacc is not None else 0
        if not n or n % instr.threads:
            raise InterpreterError(f"mma accumulator layout {Lacc} does not spread over whole {instr.threads}-thread "
                                   f"groups of {instr.name}", span)
        G = n // instr.threads
        origin = getattr(Lacc, "origin", ())
        if origin and len(origin) >= 3 and origin[1] == "c":
            return tuple(origin[2])
        ts = Lacc.thread_shape
        if len(ts) >= 2 and ts[-2] * ts[-1] == G:
            return (int(ts[-2]), int(ts[-1]))
        return (G, 1)

    @staticmethod
    def _group_matrix(op, sl, shape):
        if op[0] == "full":
            return op[1]
        _, regs, L = op
        m = np.zeros(shape, dtype=np.float32)
        m[tuple(c[sl] for c in L.coords)] = regs[sl]
        return m

    def _reg_operand(self, instr, which, x, Lact, Lexp, e):
        """('full', matrix) when the registers hold the operand as the instruction reads it, else
        ('regs', physical registers [T, V], expected layout): the instruction reinterprets the registers."""
        if Lact is None or _same_tv(Lact, Lexp):
            return ("full", x)
        if (Lact.num_threads, Lact.num_values) != (Lexp.num_threads, Lexp.num_values):
            raise InterpreterError(
                f"mma operand {which.upper()} has layout {Lact} (T={Lact.num_threads}, V={Lact.num_values}) but "
                f"{instr.name} reads it as {Lexp} (T={Lexp.num_threads}, V={Lexp.num_values}); convert_layout it "
                "first", e.span)
        return ("regs", _at(x, Lact.coords, (Lact.num_threads, Lact.num_values)), Lexp)

    def _mma_operand(self, instr, which, x, t, shape, warps, tids, act, e, ctx):
        frag = instr.operand(which)
        if isinstance(x, SharedRef):
            if tuple(x.shape) != tuple(shape):
                raise InterpreterError(f"mma operand {which.upper()} is a {list(x.shape)} shared tile; expected "
                                       f"{list(shape)}", e.span)
            off = x.offsets(None, e.span)  # [shape], every element: what the instruction reads
            full = _storage(x.buf.array[off], instr.ab).astype(np.float32)
            if self.recording:
                self._record_mma_reads(instr, which, x, shape, warps, tids, act, off, e, ctx)
            return ("full", full)
        if not isinstance(t, RegType):
            raise InterpreterError(f"mma operand {which.upper()} must be a register or shared tile, got {t}", e.span)
        if frag is None:
            raise InterpreterError(f"{instr.name} reads operand {which.upper()} from shared memory; pass a shared "
                                   "tile (stage) instead of a register tile", e.span)
        try:
            Lexp = _mma_layout(instr, which, tuple(shape), warps)
        except ValueError as ex:
            raise InterpreterError(str(ex), e.span) from None
        vals = _storage(np.asarray(x), instr.ab).astype(np.float32)
        return self._reg_operand(instr, which, vals, t.layout, Lexp, e)

    def _record_mma_reads(self, instr, which, x, shape, warps, tids, act, off_all, e, ctx):
        op, it, seq = self._rec_ctx(e, ctx)
        frag = instr.operand(which)
        if frag is not None:  # each thread reads the elements of its fragment (ldmatrix-like)
            L = _mma_layout(instr, which, tuple(shape), warps)
            off = x.offsets(span=e.span, tv=L)
            thr = np.broadcast_to(tids[:, None], off.shape)
            if act is not None:
                keep = np.broadcast_to(act[:, None], off.shape)
                off, thr = off[keep], thr[keep]
        else:  # descriptor-based (wgmma): each group reads its rows of A / columns of B, by its first thread
            gm, gn = warps
            p, q = instr.operand_shape(which)
            r, c = np.indices(shape)
            offs, thrs = [], []
            for g in range(gm * gn):
                gi, gj = g % gm, g // gm
                sel = (r // p) % gm == gi if which == "a" else (c // q) % gn == gj
                first = g * instr.threads
                if act is not None and not act[first]:
                    continue
                offs.append(off_all[sel])
                thrs.append(np.full(int(sel.sum()), tids[first]))
            off = np.concatenate(offs) if offs else np.empty(0, np.int64)
            thr = np.concatenate(thrs) if thrs else np.empty(0, np.int64)
        self.rec.add(block=self.block_lin, thread=thr, space=SHARED, buffer=x.buf.index, offset=off,
                     nbytes=x.dtype.bytes, write=False, interval=self.interval, interval_end=self.interval, op=op,
                     iteration=it, seq=seq)

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
