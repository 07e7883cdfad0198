"""Memory of the CPU interpreter: global tensors and views of them, shared-memory allocations and their
stage views, mbarriers, the block's async-copy groups, and the access recorder.

Everything here works on whole numpy index arrays (one entry per (thread, value) slot), never per element.
Element offsets are in elements of the buffer's type; global tensors are C-contiguous (row-major).
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np

from . import dtypes as dt
from .errors import InterpreterError, Span
from .types import SharedType

GLOBAL, SHARED = 0, 1

ACCESS_DTYPE = np.dtype([
    ("block", "i4"),         # linear block id: x + gx * (y + gy * z)
    ("thread", "i4"),        # thread id in the block (real id, also inside roles)
    ("space", "i1"),         # 0 global, 1 shared
    ("buffer", "i2"),        # param index (global) or shared allocation index (shared)
    ("offset", "i8"),        # element offset in the buffer
    ("nbytes", "i1"),        # element size in bytes (bf16: 2)
    ("write", "?"),
    ("interval", "i4"),      # barrier interval at issue
    ("interval_end", "i4"),  # barrier interval at completion (async copies: when retired)
    ("op", "i4"),            # index into Trace.ops
    ("iteration", "i4"),     # index into Trace.iterations
    ("seq", "i4"),           # execution order of the op within the run (shared with Trace.events)
])


def thread_ranges(tids) -> str:
    """'0-31, 64-95' for a sorted array of thread ids."""
    tids = np.asarray(tids).ravel()
    if tids.size == 0:
        return "no threads"
    breaks = np.nonzero(np.diff(tids) != 1)[0]
    starts = np.concatenate([[0], breaks + 1])
    ends = np.concatenate([breaks, [tids.size - 1]])
    parts = [f"{tids[s]}" if s == e else f"{tids[s]}-{tids[e]}" for s, e in zip(starts, ends)]
    return "threads " + ", ".join(parts)


# --------------------------------------------------------------------------------------------- global


class TensorBuf:
    """A kernel argument in global memory: `array` is C-contiguous in the storage dtype of `dtype`;
    `flat` is a 1-D view of it (writes land in the caller's array)."""

    __slots__ = ("index", "name", "dtype", "array", "flat", "shape", "rstrides")

    def __init__(self, index: int, name: str, dtype: dt.DType, array: np.ndarray):
        self.index, self.name, self.dtype, self.array = index, name, dtype, array
        self.flat = array.reshape(-1)
        self.shape = tuple(int(n) for n in array.shape)
        st, acc = [], 1
        for n in reversed(self.shape):
            st.append(acc)
            acc *= n
        self.rstrides = tuple(reversed(st))

    def __repr__(self) -> str:
        return f"<tensor {self.name} {self.dtype}{list(self.shape)}>"


class GlobalView:
    """A statically shaped window of a global tensor at run-time `starts` (one per tensor dimension; ints
    or per-thread int arrays indexed by real thread id). `squeeze[d]` drops dimension d from the tile."""

    __slots__ = ("buf", "starts", "sizes", "squeeze", "shape")

    def __init__(self, buf: TensorBuf, starts: tuple, sizes: tuple, squeeze: tuple):
        self.buf, self.starts, self.sizes, self.squeeze = buf, starts, sizes, squeeze
        self.shape = tuple(n for n, sq in zip(sizes, squeeze) if not sq)

    @property
    def dtype(self) -> dt.DType:
        return self.buf.dtype

    @property
    def per_thread(self) -> bool:
        return any(isinstance(s, np.ndarray) for s in self.starts)

    def locate(self, coords: tuple, tids=None):
        """Element offsets and in-bounds mask for tile coordinates `coords` (one int array per tile
        dimension, all of one shape). `tids` (broadcastable to that shape) gives the real thread of each
        coordinate, needed when a start is per-thread."""
        shape = np.broadcast_shapes(*(np.shape(c) for c in coords)) if coords else np.shape(tids)
        off = np.zeros(shape, dtype=np.int64)
        inb = np.ones(shape, dtype=bool)
        it = iter(coords)
        for d, n in enumerate(self.buf.shape):
            st = self.starts[d]
            if isinstance(st, np.ndarray):
                st = st[tids]
            g = st if self.squeeze[d] else st + next(it)
            inb &= (g >= 0) & (g < n)
            off += g * self.buf.rstrides[d]
        return off, inb

    def __repr__(self) -> str:
        return f"<view {self.buf.name}{list(self.shape)} at {self.starts}>"


class GatherView(GlobalView):
    """A gather/scatter view: tile element c is the tensor element at (index[0][c], index[1][c], ...); each
    index is an int (a uniform scalar) or an int array broadcastable to the tile's logical shape. It has no
    window: `starts` are 0 and every tensor dimension counts as squeezed."""

    __slots__ = ("index",)

    def __init__(self, buf: TensorBuf, index: tuple, shape: tuple):
        rank = len(buf.shape)
        super().__init__(buf, (0,) * rank, (1,) * rank, (True,) * rank)
        self.index = tuple(np.broadcast_to(np.asarray(ix, dtype=np.int64), shape) if np.ndim(ix) else int(ix)
                           for ix in index)
        self.shape = tuple(shape)

    @property
    def per_thread(self) -> bool:
        return False

    def indices(self, coords: tuple) -> list:
        """The tensor index of each dimension at tile coordinates `coords`."""
        return [ix[coords] if isinstance(ix, np.ndarray) else ix for ix in self.index]

    def locate(self, coords: tuple, tids=None):
        shape = np.broadcast_shapes(*(np.shape(c) for c in coords)) if coords else np.shape(tids)
        off = np.zeros(shape, dtype=np.int64)
        inb = np.ones(shape, dtype=bool)
        for g, n, stride in zip(self.indices(coords), self.buf.shape, self.buf.rstrides):
            inb &= (g >= 0) & (g < n)
            off += np.asarray(g, dtype=np.int64) * stride
        return np.where(inb, off, 0), inb

    def __repr__(self) -> str:
        return f"<gather {self.buf.name}{list(self.shape)}>"


# --------------------------------------------------------------------------------------------- shared


def _poison(dtype: dt.DType) -> object:
    if dtype.is_float:
        return np.nan
    if dtype.kind == "bool":
        return True
    return np.iinfo(dtype.np).max  # recognizable garbage for integer shared memory


class SharedBuf:
    """One `shared()` allocation of a block: a flat array of stage_elems * stages elements, filled with
    poison (NaN for floats, the type's max for ints) since shared memory starts uninitialized."""

    __slots__ = ("index", "name", "type", "stages", "stage_elems", "array")

    def __init__(self, index: int, name: str, stype: SharedType):
        self.index, self.name, self.type = index, name, stype
        self.stages = stype.stages or 1
        self.stage_elems = int(stype.stage_elems)
        self.array = np.full(self.stage_elems * self.stages, _poison(stype.dtype), dtype=stype.dtype.np)

    def __repr__(self) -> str:
        return f"<shared {self.name} {self.type}>"


# Offsets themselves come from SharedType.offset; these cache the read-only arrays that repeat on every
# access (a register layout's coordinates, or the whole tile).
@lru_cache(maxsize=512)
def _offsets_of_tv(stype: SharedType, tv) -> np.ndarray:
    out = np.asarray(stype.offset(tv.coords), dtype=np.int64)
    out.setflags(write=False)
    return out


@lru_cache(maxsize=256)
def _offsets_of_tile(stype: SharedType) -> np.ndarray:
    coords = tuple(np.indices(stype.shape, dtype=np.int64)) if stype.shape else ()
    out = np.asarray(stype.offset(coords), dtype=np.int64)
    out.setflags(write=False)
    return out


class SharedRef:
    """A shared value: the allocation, the (single-stage) SharedType seen, and the stage (None for an
    allocation without stages)."""

    __slots__ = ("buf", "type", "stage", "origin")

    def __init__(self, buf: SharedBuf, stype: SharedType, stage: int | None, origin: int = 0):
        self.buf, self.type, self.stage = buf, stype, stage
        self.origin = origin  # a window (SharedType.window): element offset of its element 0

    @property
    def shape(self) -> tuple:
        return tuple(self.type.shape)

    @property
    def dtype(self) -> dt.DType:
        return self.type.dtype

    def offsets(self, coords=None, span: Span | None = None, tv=None) -> np.ndarray:
        """Element offsets in the allocation: stage * stage_elems + SharedType.offset(coords). `tv` (a
        TVLayout) uses its cached coordinates; `coords=None` and no `tv` gives every element of the tile
        in row-major order of its shape. Raises InterpreterError for an offset outside the stage."""
        if self.stage is None and self.buf.stages > 1:
            raise InterpreterError(
                f"shared tile '{self.buf.name}' has {self.buf.stages} stages; select one with stage(...) "
                "before using it", span)
        st = self.type.stage() if self.type.stages else self.type
        if tv is not None:
            off = _offsets_of_tv(st, tv)
        elif coords is None:
            off = _offsets_of_tile(st)
        else:
            off = np.asarray(st.offset(tuple(np.asarray(c, dtype=np.int64) for c in coords)), dtype=np.int64)
        if self.origin:
            off = off + self.origin
        n = self.buf.stage_elems
        if off.size and (int(off.min()) < 0 or int(off.max()) >= n):
            bad = int(off.max()) if int(off.max()) >= n else int(off.min())
            raise InterpreterError(
                f"shared tile '{self.buf.name}': layout {self.type.layout}"
                + (f" with swizzle {self.type.swizzle}" if self.type.swizzle else "")
                + f" maps an element to offset {bad}, outside the stage's {n} elements", span)
        base = (self.stage or 0) * n
        return off + base if base else off

    def __repr__(self) -> str:
        return f"<shared {self.buf.name} stage {self.stage}>"


def check_stage(buf: SharedBuf, index, span: Span) -> int:
    if isinstance(index, np.ndarray):
        vals = np.unique(index)
        if vals.size != 1:
            raise InterpreterError(f"stage index of '{buf.name}' differs between threads: {vals.tolist()}", span)
        index = vals[0]
    index = int(index)
    if not 0 <= index < buf.stages:
        raise InterpreterError(
            f"stage index {index} is out of range for shared tile '{buf.name}' with {buf.stages} stages", span)
    return index


# --------------------------------------------------------------------------------------------- barriers


class PendingCopy:
    """Shared-memory writes of an async or bulk copy that have been issued but have not landed."""

    __slots__ = ("buf", "offsets", "values", "threads", "groups", "op", "iteration", "interval", "seq", "phase",
                 "tags")

    def __init__(self, buf, offsets, values, threads, op, iteration, interval, seq, groups=None, phase=0,
                 tags=None):
        self.buf, self.offsets, self.values, self.threads = buf, offsets, values, threads
        self.groups, self.phase = groups, phase
        self.op, self.iteration, self.interval, self.seq = op, iteration, interval, seq
        self.tags = tags  # a tag tracker's data parallel to `offsets` (interpreter.TagTracker.on_pending)

    def take(self, sel: np.ndarray) -> PendingCopy:
        return PendingCopy(self.buf, self.offsets[sel], self.values[sel], self.threads[sel], self.op,
                           self.iteration, self.interval, self.seq, None if self.groups is None else
                           self.groups[sel], self.phase, None if self.tags is None else self.tags[sel])


class MBarrier:
    """An mbarrier: `count` arrivals complete a phase; `completed` counts completed phases. Bulk copies
    tied to the phase in progress at their issue land when a wait sees that phase completed."""

    __slots__ = ("index", "name", "count", "arrivals", "completed", "pending", "tx")

    def __init__(self, index: int, name: str, count: int):
        self.index, self.name, self.count = index, name, int(count)
        self.arrivals = 0
        self.completed = 0
        self.pending: list[PendingCopy] = []
        self.tx = 0  # multicast copies expected in the phase in progress and not yet delivered (a cluster's)

    def arrive(self) -> bool:
        self.arrivals += 1
        return self._complete()

    def expect(self, n: int) -> bool:
        """A multicast copy this CTA expects (+1) or one delivered into it (-1): with copies outstanding the
        phase waits for them after its arrivals, as the hardware's transaction count does."""
        self.tx += n
        return self._complete()

    def _complete(self) -> bool:
        if self.arrivals >= self.count and self.tx == 0:
            self.arrivals = 0
            self.completed += 1
            return True
        return False

    def __repr__(self) -> str:
        return f"<mbarrier {self.name}: {self.completed} phases, {self.arrivals}/{self.count} arrivals>"


class AsyncGroups:
    """cp.async groups of one block, per thread: `committed[t]` is how many groups thread t committed,
    which is also the number of its open group. Pending copies carry (thread, group) per element."""

    __slots__ = ("committed", "pending")

    def __init__(self, num_threads: int):
        self.committed = np.zeros(num_threads, dtype=np.int64)
        self.pending: list[PendingCopy] = []

    def retire(self, active: np.ndarray, n: int) -> list[PendingCopy]:
        """Remove and return (in issue order) the copies of `active` threads that are in committed groups
        older than their newest `n` committed ones."""
        done, keep = [], []
        for p in self.pending:
            sel = active[p.threads] & (p.groups < self.committed[p.threads] - n)
            if sel.all():
                done.append(p)
            elif sel.any():
                done.append(p.take(sel))
                keep.append(p.take(~sel))
            else:
                keep.append(p)
        self.pending = keep
        return done


# --------------------------------------------------------------------------------------------- recording


class Event(NamedTuple):
    kind: str  # barrier | mbarrier_arrive | mbarrier_complete | mbarrier_wait | copy_bulk | commit_async |
    #            wait_async | async_unretired
    block: int
    interval: int
    op: int  # index into Trace.ops
    seq: int
    threads: str  # the threads executing it, as ranges
    target: int | None = None  # mbarrier index, where one is involved
    value: int | None = None  # phase waited / phases completed / wait_async n


class Recorder:
    """Collects access rows per op as structured-array chunks (concatenated once at the end), interns the
    IR nodes (Trace.ops) and loop-iteration vectors (Trace.iterations), and keeps the events."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.chunks: list[np.ndarray] = []
        self.ops: list = []
        self._op_ids: dict[int, int] = {}
        self.iterations: list[tuple] = []
        self._it_ids: dict[tuple, int] = {}
        self.events: list[Event] = []
        self.seq = 0

    def op(self, node) -> int:
        i = self._op_ids.get(id(node))
        if i is None:
            i = self._op_ids[id(node)] = len(self.ops)
            self.ops.append(node)
        return i

    def iteration(self, iters: tuple) -> int:
        i = self._it_ids.get(iters)
        if i is None:
            i = self._it_ids[iters] = len(self.iterations)
            self.iterations.append(iters)
        return i

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def add(self, *, block, thread, space, buffer, offset, nbytes, write, interval, interval_end, op, iteration,
            seq):
        """Rows for one op: `offset` (any shape) and `thread` (broadcastable to it) are arrays; the other
        fields are one value for the whole chunk. Chunks stay columnar until `finish`."""
        offset = np.asarray(offset)
        if offset.size == 0:
            return
        thread = np.broadcast_to(thread, offset.shape).ravel()
        self.chunks.append((thread, offset.ravel(), (block, space, buffer, nbytes, write, interval, interval_end, op,
                                                     iteration, seq)))

    _SCALARS = ("block", "space", "buffer", "nbytes", "write", "interval", "interval_end", "op", "iteration", "seq")

    def finish(self) -> np.ndarray:
        """All rows as one structured array (ACCESS_DTYPE), in recording order."""
        if not self.chunks:
            return np.empty(0, dtype=ACCESS_DTYPE)
        sizes = np.fromiter((c[1].size for c in self.chunks), dtype=np.int64, count=len(self.chunks))
        out = np.empty(int(sizes.sum()), dtype=ACCESS_DTYPE)
        out["thread"] = np.concatenate([c[0] for c in self.chunks])
        out["offset"] = np.concatenate([c[1] for c in self.chunks])
        scalars = np.array([c[2] for c in self.chunks], dtype=np.int64)
        for j, name in enumerate(self._SCALARS):
            out[name] = np.repeat(scalars[:, j], sizes)
        return out
