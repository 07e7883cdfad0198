"""Memory ops of the CPU interpreter: global views and shared allocations, loads and stores between
registers and memory, synchronous / async (cp.async) / bulk (TMA-like) copies, block barriers and mbarriers.

The state these ops act on (buffers, views, pending copies, mbarriers, the access recorder) is in
interp_memory; this module holds the ops. `_MemoryOps` is mixed into `interpreter._Interpreter`, which
dispatches IR ops to its `_op_<name>` methods; the methods use the interpreter's per-block state (`shared`,
`mbars`, `async_`, `interval`, `rec`) and helpers (`_args`, `_thread_map`, `_tile_operand`, `_event`).
`_mbarrier_wait` is a generator: it yields a `_Wait` to the role scheduler until the phase completes.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .errors import InterpreterError, Span, TilepyError
from .interp_memory import (
    GLOBAL,
    SHARED,
    GlobalView,
    MBarrier,
    PendingCopy,
    SharedBuf,
    SharedRef,
    TensorBuf,
    check_stage,
    thread_ranges,
)
from .interp_ops import _at, _storage
from .ir import Call
from .tv_layout import TVLayout, blocked
from .types import MBarrierType, RegType, SharedType

# ============================================================================================ helpers


class _Wait:
    """A role suspended in `mbarrier_wait` until `bar` has completed more than `phase` phases; the role
    scheduler (interpreter._Interpreter._roles) resumes it once `ready()`."""

    __slots__ = ("bar", "phase", "span", "ctx")

    def __init__(self, bar: MBarrier, phase: int, span: Span, ctx):
        self.bar, self.phase, self.span, self.ctx = bar, phase, span, ctx

    def ready(self) -> bool:
        return self.bar.completed > self.phase

    def leaves(self):
        yield self


@lru_cache(maxsize=512)
def _blocked(shape: tuple, threads: int, vec: int) -> TVLayout:
    return blocked(shape, threads, vec)


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


# ============================================================================================ ops


class _MemoryOps:
    """The memory ops of `_Interpreter` (a mixin: see the module docstring)."""

    # ------------------------------------------------------------------------------------ views, shared tiles

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

    def _op_shared_permute(self, e, ctx):
        (s,) = self._args(e, ctx)[:1]
        if not isinstance(s, SharedRef):
            raise InterpreterError(f"permute of a shared tile needs a shared tile, got {type(s).__name__}", e.span)
        return SharedRef(s.buf, s.type.permute(tuple(e.attrs["dims"])), s.stage, s.origin)

    def _op_shared_window(self, e, ctx):
        (s,) = self._args(e, ctx)[:1]
        if not isinstance(s, SharedRef):
            raise InterpreterError(f"a window of a shared tile needs a shared tile, got {type(s).__name__}", e.span)
        wtype, origin = s.type.window(tuple(e.attrs["starts"]), tuple(e.attrs["sizes"]), tuple(e.attrs["squeeze"]))
        return SharedRef(s.buf, wtype, s.stage, s.origin + origin)

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
        if self._hooks["on_read"] is not None:
            self._hooks["on_read"](node, src, coords, np.broadcast_to(thr, shape), self._tag_info(ctx))
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
        if self._hooks["on_write"] is not None:
            self._hooks["on_write"](node, dst, coords, thr, off, np.broadcast_to(w, (n,)), self._tag_info(ctx))
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
        if e.attrs.get("cta") is not None:
            src = self._remote_shared(src, int(e.attrs["cta"]), e.span)
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

    def _remote_shared(self, src, rank: int, span):
        """load(..., cta=rank): the same allocation, stage and window in block `rank` of the cluster."""
        cta = self.peer(rank, span, "a load of another block's shared memory (cta=)")
        if cta is None or rank == getattr(self, "cta_rank", 0):
            return src
        buf = next((b for b in cta.shared.values() if b.index == src.buf.index), None)
        if buf is None:
            raise InterpreterError(f"a load reaches block {cta.block} (cluster rank {rank}) before it allocated "
                                   f"'{src.buf.name}': call tp.cluster_sync() after it has written the tile", span)
        return SharedRef(buf, src.type, src.stage, src.origin)

    @staticmethod
    def _load_arg_positions(e) -> tuple:
        """(mask index, other index) among load's args. The front end writes load(src, other, [mask]) with
        attrs{masked}; the catalogue's order load(src, [mask], [other]) is used when `masked` is absent."""
        if "masked" in e.attrs:
            return (2 if e.attrs["masked"] else None), 1
        return 1, 2

    def _default_layout(self, shape, ctx, dtype):
        return _blocked(tuple(shape), int(ctx.tids.size), max(16 // dtype.bytes, 1))

    def _stored_values(self, e, ctx, dst, val):
        """Who writes what of a store's register tile `val` into `dst`: (shape, layout, tids, t_idx, coords,
        vals), each element once, by the lowest active thread holding it (the value's own layout where it is a
        register tile of dst's shape, else the default layout of dst's shape)."""
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
        return shape, layout, tids, t_idx, coords, vals

    def _op_store(self, e, ctx):
        args = self._args(e, ctx)
        dst, val = args[0], args[1]
        mask = args[2] if len(args) > 2 else None
        if not isinstance(dst, GlobalView | SharedRef):
            raise InterpreterError(f"store() needs a global or shared tile, got {type(dst).__name__}", e.span)
        shape, layout, tids, t_idx, coords, vals = self._stored_values(e, ctx, dst, val)
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
        p = PendingCopy(dst.buf, off, _storage(vals, dst.dtype), thr, op, it, self.interval, seq,
                        groups=self.async_.committed[thr])
        self.async_.pending.append(p)
        if self._hooks["on_pending"] is not None:
            self._hooks["on_pending"](e, p, self._tag_info(ctx))

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
        if self._hooks["on_land"] is not None:
            self._hooks["on_land"](p)
        if self.recording:
            self.rec.add(block=self.block_lin, thread=p.threads, space=SHARED, buffer=p.buf.index, offset=p.offsets,
                         nbytes=p.buf.type.dtype.bytes, write=True, interval=p.interval,
                         interval_end=self.interval, op=p.op, iteration=p.iteration, seq=p.seq)

    def _op_copy_bulk(self, e, ctx):
        if "multicast" in e.attrs:
            return self._copy_bulk_multicast(e, ctx)
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
        p = PendingCopy(dst.buf, off, _storage(vals, dst.dtype), np.array(thr), op, it, self.interval, seq,
                        phase=bar.completed)
        bar.pending.append(p)
        if self._hooks["on_pending"] is not None:
            self._hooks["on_pending"](e, p, self._tag_info(ctx))
        self._event("copy_bulk", e, ctx, target=bar.index, value=bar.completed)

    def _copy_bulk_multicast(self, e, ctx):
        """copy_bulk(..., multicast=mask, by=r), executed by every block of the mask: each expects one copy on its
        own mbarrier; block r reads the tile once and delivers it into the same shared allocation and offsets of
        every block of the mask, tied to the phase of that block's mbarrier in progress at the delivery."""
        src, dst, bar = self._args(e, ctx)[:3]
        if not isinstance(src, GlobalView) or not isinstance(dst, SharedRef) or not isinstance(bar, MBarrier):
            raise InterpreterError("copy_bulk(src, dst, mbarrier) copies a global tile into a shared tile", e.span)
        by = self._uniform_int(e.args[3], ctx, "copy_bulk by= (the issuing cluster rank)")
        mask = int(e.attrs["multicast"])
        me = getattr(self, "cta_rank", 0)
        if not (mask >> me) & 1:
            raise InterpreterError(f"this block (cluster rank {me}) executes a multicast copy whose mask {mask:#b} "
                                   "does not include it: every block of the mask executes it, and no other", e.span)
        if not (mask >> by) & 1:
            raise InterpreterError(f"by={by}: the issuing rank is not in the multicast mask {mask:#b}", e.span)
        if bar.expect(1):
            self._event("mbarrier_complete", e, ctx, target=bar.index, value=bar.completed)
        if by != me:
            return
        shape = tuple(src.shape)
        coords = tuple(c.ravel() for c in np.indices(shape, dtype=np.int64)) if shape else ()
        thr = np.broadcast_to(ctx.tids[:1], coords[0].shape if coords else (1,))
        vals, _ = self._gather(src, coords, thr, None, e, ctx, e.span)
        off = np.broadcast_to(dst.offsets(coords, e.span), thr.shape)
        vals = _storage(vals, dst.dtype)
        op, it, seq = self._rec_ctx(e, ctx) if self.recording else (0, 0, 0)
        for rank in range(mask.bit_length()):
            if not (mask >> rank) & 1:
                continue
            cta = self.peer(rank, e.span, "a multicast copy")
            tbuf, tbar = dst.buf, bar
            if cta is not None and rank != me:
                tbuf = next((b for b in cta.shared.values() if b.index == dst.buf.index), None)
                tbar = _bar_by_index(cta.mbars, bar.index)
                if tbuf is None or tbar is None:
                    raise InterpreterError(
                        f"a multicast copy reaches block {cta.block} (cluster rank {rank}) before it allocated "
                        f"'{dst.buf.name}' / '{bar.name}': call tp.cluster_sync() after the allocations (and mbarrier "
                        "initializations), before any block copies into another", e.span)
            p = PendingCopy(tbuf, off, vals, np.array(thr), op, it, self.interval, seq, phase=tbar.completed)
            tbar.pending.append(p)
            if self._hooks["on_pending"] is not None:
                self._hooks["on_pending"](e, p, self._tag_info(ctx))
            tbar.expect(-1)
        self._event("copy_bulk", e, ctx, target=bar.index, value=bar.completed)

    def _op_store_remote(self, e, ctx):
        """store_remote(dst, value, mbarrier, cta): the register tile's elements (each once, by the lowest thread
        holding it) written into the same allocation of block `cta` of the cluster, tied to the phase of that
        block's `mbarrier` in progress now, which this op arrives on once: they land when a wait there sees the
        phase completed (st.async completes its bytes on that mbarrier; the arrival carries their count)."""
        args = self._args(e, ctx)
        dst, val, bar = args[0], args[1], args[2]
        if not isinstance(dst, SharedRef) or not isinstance(bar, MBarrier):
            raise InterpreterError("store_remote(dst, value, mbarrier, cta) writes a shared tile, its bytes "
                                   "completing an mbarrier", e.span)
        rank = self._uniform_int(e.args[3], ctx, "store_remote cta= (a cluster rank)")
        shape, layout, tids, t_idx, coords, vals = self._stored_values(e, ctx, dst, val)
        if len(t_idx) != int(np.prod(shape)):
            raise InterpreterError(f"store_remote writes every element of its {list(shape)} tile once (the bytes "
                                   f"its mbarrier expects); the active threads hold {len(t_idx)} of them", e.span)
        off = np.asarray(dst.offsets(coords, e.span))
        tbuf, tbar = dst.buf, bar
        cta = self.peer(rank, e.span, "a remote store (tp.store_remote)")
        if cta is not None and rank != getattr(self, "cta_rank", 0):
            tbuf = next((b for b in cta.shared.values() if b.index == dst.buf.index), None)
            tbar = _bar_by_index(cta.mbars, bar.index)
            if tbuf is None or tbar is None:
                raise InterpreterError(
                    f"a remote store reaches block {cta.block} (cluster rank {rank}) before it allocated "
                    f"'{dst.buf.name}' / initialized '{bar.name}': call tp.cluster_sync(relaxed=True) after the "
                    "allocations, before any block stores into another", e.span)
        op, it, seq = self._rec_ctx(e, ctx) if self.recording else (0, 0, 0)
        p = PendingCopy(tbuf, np.ravel(off), _storage(np.ravel(vals), dst.dtype), np.ravel(tids[t_idx]), op, it,
                        self.interval, seq, phase=tbar.completed)
        tbar.pending.append(p)
        if self._hooks["on_pending"] is not None:
            self._hooks["on_pending"](e, p, self._tag_info(ctx))
        done = tbar.arrive()
        self._event("mbarrier_arrive", e, ctx, target=tbar.index, value=tbar.completed)
        if done:
            self._event("mbarrier_complete", e, ctx, target=tbar.index, value=tbar.completed)

    def _op_cluster_rank(self, e, ctx):
        return getattr(self, "cta_rank", 0)

    def _op_cluster_sync(self, e, ctx):
        """The statement loop runs tp.cluster_sync (interpreter._cluster_sync: it waits for the cluster's other
        blocks); this is its block-local part, a barrier of all the block's threads."""
        if not ctx.full:
            raise InterpreterError(
                f"tp.cluster_sync() inside a role branch ({thread_ranges(ctx.tids)}): every thread of every block of "
                "the cluster must reach it; call it where all the block's threads run", e.span)
        self.interval += 1
        self._event("barrier", e, ctx)

    def _op_store_bulk(self, e, ctx):
        """A TMA store: issued by the role's first thread, it reads `src` asynchronously. The interpreter reads
        it at the latest moment the hardware may, the role's next store_bulk_wait, so a write into `src` before
        that wait changes what lands in global memory (as it can on the GPU)."""
        src, dst = self._args(e, ctx)[:2]
        if not isinstance(src, SharedRef) or not isinstance(dst, GlobalView):
            raise InterpreterError("store_bulk(src, dst) stores a shared tile into a global tile", e.span)
        if tuple(src.shape) != tuple(dst.shape):
            raise InterpreterError(f"store_bulk between tiles of different shapes {list(src.shape)} and "
                                   f"{list(dst.shape)}", e.span)
        issuer = int(ctx.tids[0])
        self.bulk_stores.append((issuer, src, dst, e, ctx))
        self._event("store_bulk", e, ctx)

    def _op_store_bulk_wait(self, e, ctx):
        issuer = int(ctx.tids[0])
        keep = []
        for item in self.bulk_stores:
            if item[0] != issuer:
                keep.append(item)
                continue
            _, src, dst, node, ictx = item
            shape = tuple(src.shape)
            coords = tuple(c.ravel() for c in np.indices(shape, dtype=np.int64)) if shape else ()
            thr = np.full(coords[0].shape if coords else (1,), issuer, dtype=np.int64)
            vals, _ = self._gather(src, coords, thr, None, e, ctx, e.span)
            self._scatter_write(dst, coords, thr, vals, None, node, ictx, node.span)   # past the tensor: skipped
        self.bulk_stores = keep
        self._event("store_bulk_wait", e, ctx)

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
            stages = e.attrs.get("stages")
            base = self.name_hint or "mbarrier"
            made = []
            for i in range(1 if stages is None else int(stages)):
                key = (id(e), i)
                idx = self.mbarrier_index.get(key)
                if idx is None:
                    idx = self.mbarrier_index[key] = len(self.mbarrier_names)
                    self.mbarrier_names.append(base if stages is None and self.name_hint else
                                               f"{base}{idx}" if stages is None else f"{base}[{i}]")
                made.append(MBarrier(idx, self.mbarrier_names[idx], int(count)))
            bar = self.mbars[id(e)] = made[0] if stages is None else made
        return bar

    def _op_mbarrier_at(self, e, ctx):
        bars = self._args(e, ctx)[0]
        if not isinstance(bars, list):
            raise InterpreterError(f"mbarrier_at indexes an mbarrier array, got {type(bars).__name__}", e.span)
        i = self._uniform_int(e.args[1], ctx, "mbarrier index")
        if not 0 <= i < len(bars):
            raise InterpreterError(f"mbarrier index {i} is outside 0..{len(bars) - 1}", e.span)
        return bars[i]

    def _op_mma_wait(self, e, ctx):
        # The interpreter computes an mma_async's value at issue; the verifier checks that a released stage's
        # group was retired (tilepy_verify.mbarrier_arrays).
        self._event("mma_wait", e, ctx, value=int(e.attrs.get("n", 0)))

    def _op_setmaxnreg(self, e, ctx):
        return None

    def _op_mbarrier_arrive(self, e, ctx):
        (bar,) = self._args(e, ctx)[:1]
        if not isinstance(bar, MBarrier):
            raise InterpreterError(f"mbarrier_arrive needs an mbarrier, got {type(bar).__name__}", e.span)
        if len(e.args) > 1:    # cta=: the mbarrier of the same allocation in that block of the cluster
            rank = self._uniform_int(e.args[1], ctx, "mbarrier_arrive cta= (a cluster rank)")
            cta = self.peer(rank, e.span, "a remote mbarrier arrival")
            if cta is not None and rank != getattr(self, "cta_rank", 0):
                remote = _bar_by_index(cta.mbars, bar.index)
                if remote is None:
                    raise InterpreterError(
                        f"a remote arrival reaches block {cta.block} (cluster rank {rank}) before it initialized "
                        f"'{bar.name}': call tp.cluster_sync() after the mbarrier allocations", e.span)
                bar = remote
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


def _bar_by_index(mbars: dict, index: int):
    """The MBarrier of allocation index `index` among a block's mbarriers (None: not allocated yet)."""
    for v in mbars.values():
        for b in v if isinstance(v, list) else (v,):
            if b.index == index:
                return b
    return None
