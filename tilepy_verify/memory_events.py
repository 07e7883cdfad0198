"""The walker's memory, synchronization and MMA ops (a mixin of domain._Walker): loads and stores of global
views, shared-memory copies (synchronous, cp.async, bulk), barriers, async-copy waits, mbarrier arrivals and
waits, MMAs and tag statements. Each becomes events of the analysis (events.py): an `Access` per shared-memory
access op with its per-thread slots, `Wait`, `BarrierEv`, `Arrive`, `MmaOp`, `Assertion`; the walker's driver,
statements and value ops are in domain.py."""

from __future__ import annotations

import numpy as np

from tilepy import ir
from tilepy.instructions import mma_operand_layout
from tilepy.tv_layout import TVLayout, blocked
from tilepy.types import RegType

from . import gathers, symbolic_ring
from .events import (
    UNKNOWN,
    Access,
    Arrive,
    Assertion,
    BarrierEv,
    GView,
    MmaContrib,
    MmaOp,
    MmaOps,
    OperandTag,
    Reg,
    SRef,
    TensorVal,
    Wait,
    WriteRec,
    arr_key,
    intlike,
)
from .reaching import reaching_tag
from .tagterms import TOP, Alt, Unknown, eval_tagfn
from .values import products_tag, tagfn_tag, untagged
from .vc import is_int


class MemoryEvents:
    """Methods of the walker (domain._Walker) for the ops that touch memory or synchronize."""

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
        bar, elem = self.bar_of(e.args[2], st)
        shape = tuple(e.args[0].type.shape)
        coords = np.indices(shape).reshape(len(shape), -1) if shape else np.zeros((0, 1), dtype=np.int64)
        first = int(st.threads[0]) if st.threads is not None and len(st.threads) else 0
        tids = np.full(coords.shape[1], first)
        acc = self.access(e, st, "async", dst, tids, np.arange(coords.shape[1]), None, channel=f"C:{bar}",
                          group=st.counters.get(f"C:{bar}", 0), coords=tuple(coords))
        key = arr_key(bar, st.role)
        acc.bar, acc.arr, acc.arr_valid = bar, st.counters.get(key, 0), st.avalid.get(key, True)
        if self.symbolic and _at_array(e.args[2]):
            # an array's element: its arrivals are counted per element by symbolic_ring.py, never by this counter
            # of the whole array (reaching.cross_role and sync.py ask for acc.arr)
            # (a multicast copy is, to each block of its mask, a copy into its own stage on its own element:
            # checks/cluster.py judges the cluster side)
            acc.arr, acc.elem = None, elem
        self.bump(st, f"C:{bar}")
        self.record_write(acc, st, self.global_tag(src))

    def eff_store_remote(self, e, st):
        """tp.store_remote(dst, value, bar, cta): the blocks of a cluster run one kernel, so it is read as a write of
        the block's own `dst` by the threads holding the tile, tied to the phase of its own `bar` in progress (as
        a bulk copy: visible after a wait that sees it complete), then one arrival of the role on `bar`
        (checks/cluster.py judges the cluster side: the other block's barrier initialized, alive until it lands)."""
        dst = self.expr(e.args[0], st)
        val = self.expr(e.args[1], st)
        bar = bar_name(e.args[2])
        key = arr_key(bar, st.role)
        if isinstance(dst, SRef):
            vt = e.args[1].type
            layout = vt.layout if isinstance(vt, RegType) and tuple(vt.shape) == dst.shape else \
                blocked(dst.shape, self.branch_threads(st), max(16 // dst.alloc.type.dtype.bytes, 1))
            tids, vals = self.slots(layout, st, owners=True)
            acc = self.access(e, st, "async", dst, tids, vals, layout, channel=f"C:{bar}",
                              group=st.counters.get(f"C:{bar}", 0))
            acc.bar, acc.arr, acc.arr_valid = bar, st.counters.get(key, 0), st.avalid.get(key, True)
            self.bump(st, f"C:{bar}")
            self.record_write(acc, st, val.tag if isinstance(val, Reg) else None)
        ev = Arrive(self.point(st, e.span), bar, key, st.counters.get(key, 0), st.avalid.get(key, True), e.span)
        if self.recording:
            self.A.arrives.append(ev)
        self.bump(st, key)

    def eff_store_bulk(self, e, st):
        """A TMA store reads its shared source asynchronously, from the issue until a store_bulk_wait of the
        issuing thread that runs after it: one read access by the issuing thread (checks/race.py finds the waits
        among `Analysis.bulk_waits`)."""
        src, dst = self.expr(e.args[0], st), self.expr(e.args[1], st)
        shape = tuple(e.args[0].type.shape)
        coords = np.indices(shape).reshape(len(shape), -1) if shape else np.zeros((0, 1), dtype=np.int64)
        first = int(st.threads[0]) if st.threads is not None and len(st.threads) else 0
        tids = np.full(coords.shape[1], first)
        if isinstance(src, SRef):
            acc = self.access(e, st, "read", src, tids, np.arange(coords.shape[1]), None, coords=tuple(coords))
            acc.bulk_store = True
        gathers.record(self, e, st, "write", dst)

    def eff_store_bulk_wait(self, e, st):
        if self.recording:
            self.A.bulk_waits.append(self.point(st, e.span))

    def eff_commit_async(self, e, st):
        self.bump(st, "C:async")

    def eff_wait_async(self, e, st):
        if self.recording:
            self.A.waits.append(Wait(self.point(st, e.span), "C:async", int(e.attrs.get("n", 0)), e.span))

    def eff_mbarrier_wait(self, e, st):
        bar, elem = self.bar_of(e.args[0], st)
        phase = self.scalar(e.args[1], st) if len(e.args) > 1 else UNKNOWN
        w = Wait(self.point(st, e.span), f"C:{bar}", 0, e.span, bar, phase if intlike(phase) else None, elem)
        self.mwaits.append(w)
        if self.recording:
            # a completed phase makes the bulk copies tied to it visible to the waiting role (sync.py)
            self.A.waits.append(w)

    def eff_mbarrier_arrive(self, e, st):
        bar, elem = self.bar_of(e.args[0], st)
        key = arr_key(bar, st.role)
        # (a cluster's remote arrive, cta=: summed over the blocks that send it, an arrival on the block's own
        # element, as the count on the copies has it; checks/cluster.py judges that the releases reach every rank)
        ev = Arrive(self.point(st, e.span), bar, key, st.counters.get(key, 0), st.avalid.get(key, True), e.span, elem)
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
            # threads past the layout's replicating (all-zero-stride) slowest thread modes repeat the first ones,
            # so every element's first owner lies among those (a copy's odd tile held by one thread: 128-512x fewer
            # slots than the whole [threads, values] grid to sort)
            n = _distinct_threads(layout)
            if n == T:
                flat = layout.flat.ravel()
            else:
                t, v = np.arange(n, dtype=np.int64)[:, None], np.arange(V, dtype=np.int64)[None, :]
                flat = np.ravel_multi_index(tuple(np.broadcast_to(np.asarray(c, dtype=np.int64), (n, V))
                                                  for c in layout.coord(t, v)), layout.tile).ravel()
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
        # the slots' own coordinates (not the whole [threads, values] grid: a copy's odd tile held by one thread
        # and replicated over 512 is 19M slots)
        pos, vals = np.asarray(pos, dtype=np.int64), np.asarray(vals, dtype=np.int64)
        return tuple(np.broadcast_to(np.asarray(c, dtype=np.int64), pos.shape) for c in layout.coord(pos, vals))

    def record_write(self, acc: Access, st, tag):
        self.writes.append(WriteRec(acc, acc.point, tag or untagged))

    def read_tag(self, ref: SRef, acc: Access):
        """Tag alternatives of the elements a read of `ref` sees: those of the most recent write to the same
        stage, found among the writes of this iteration, of the previous iterations (up to a window of
        stages + 1) and before the loop. A ring's tile read in a walk that names mbarrier array elements by term:
        the copy the read's wait lands, per element (symbolic_ring.py)."""
        if self.symbolic:
            got = symbolic_ring.reaching_tag(self, ref, acc)
            if got is not None:
                return got
        return reaching_tag(self, ref, acc)

    def bar_of(self, e, st):
        """(the mbarrier's name, its element term or None): `bars[i]` is `bars[<i>]` of the stage copies
        (mbarrier_arrays.py) or, in a walk that names array elements by term (symbolic_ring.py), the array
        `bars` with element i."""
        if self.symbolic and _at_array(e):
            idx = self.scalar(e.args[1], st)
            return f"mbar:{e.args[0].name}", (idx if intlike(idx) else None)
        return bar_name(e), None


def stype_shape(alloc) -> tuple:
    return tuple(alloc.type.shape)


def bar_name(e) -> str:
    return f"mbar:{e.name}" if isinstance(e, ir.Var) else "mbar:?"


def _at_array(e) -> bool:
    return isinstance(e, ir.Call) and e.op == "mbarrier_at" and isinstance(e.args[0], ir.Var)


def _distinct_threads(layout: TVLayout) -> int:
    """The threads [0, n) of `layout` past which its slowest thread modes only replicate (zero stride in every
    tile dimension): every (thread, value) from n on holds what a thread below n holds."""
    n = layout.num_threads
    if not layout.tile:
        return n
    for k in range(len(layout.thread_shape) - 1, -1, -1):
        if any(layout.strides[d][0][k] for d in range(len(layout.tile))):
            break
        n //= layout.thread_shape[k]
    return max(n, 1)
