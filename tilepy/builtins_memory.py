"""Type rules of the builtins that allocate tiles and move data (tp.shared, tp.zeros, tp.load, tp.copy_async, ...)."""


from __future__ import annotations

from . import dtypes as dt
from . import ir
from .builtins_util import _broadcast, _show, row_major_layout, swizzle_span
from .errors import (
    ConstexprError,
    KernelTypeError,
    ResourceError,
    ShapeError,
    TargetError,
    UnsupportedConstructError,
)
from .layout import Layout, Swizzle
from .tv_layout import TVLayout
from .types import NONE, GatherTileType, GlobalTileType, MBarrierType, RegType, ScalarType, SharedType, TensorType


class MemoryRules:
    """Mixin of BuiltinRules: allocation, construction and memory ops."""

    # ------------------------------------------------------------ allocation and construction
    def b_shared(self, node, shape, dtype, stages=None, swizzle=None, layout=None):
        if self.tr.block is not self.tr.top_block:
            raise self.err(node, "shared tiles must be allocated at the top level of the kernel",
                           "move tp.shared(...) before the loops and branches", UnsupportedConstructError)
        shape = self.const_shape(shape, node, "shared tile shape")
        dtype = self.dtype(dtype, node)
        if stages is not None:
            stages = self.const_int(stages, node, "stages")
            if stages < 1:
                raise self.err(node, "stages must be >= 1", cls=ConstexprError)
        if swizzle is not None and not isinstance(swizzle, Swizzle):
            raise self.err(node, f"swizzle must be a tp.Swizzle(bits, base, shift), got {_show(swizzle)}",
                           cls=KernelTypeError)
        if layout is None:
            layout = row_major_layout(shape)
        elif not isinstance(layout, Layout):
            raise self.err(node, f"layout must be a tp.Layout, got {_show(layout)}", cls=KernelTypeError)
        t = SharedType(dtype, shape, layout, swizzle, stages)
        if swizzle is not None and swizzle_span(swizzle) > t.stage_elems:
            raise self.err(node, f"{swizzle} permutes offsets up to {swizzle_span(swizzle)}, beyond the tile's "
                           f"{t.stage_elems} elements", "use fewer swizzle bits for this tile", ShapeError)
        self.tr.shared_bytes += t.nbytes
        limit = self.tr.target.shared_bytes
        if self.tr.shared_bytes > limit:
            raise self.err(node, f"shared memory use reaches {self.tr.shared_bytes} bytes, over the "
                           f"{limit} bytes a block has on {self.tr.target.name}",
                           "use smaller tiles or fewer pipeline stages", ResourceError)
        return self.make("shared", t, node, type=t)

    def _layout_arg(self, layout, shape, dtype, node):
        if layout is None:
            return self.default_layout(shape, dtype, node)
        if not isinstance(layout, TVLayout):
            raise self.err(node, f"layout must be a thread-value layout (tp.blocked, tp.accumulator, ...), got "
                           f"{_show(layout)}", cls=KernelTypeError)
        if tuple(layout.tile) != tuple(shape):
            raise self.err(node, f"layout covers a {layout.tile} tile, not {shape}", cls=ShapeError)
        if layout.num_threads != self.tr.num_threads:
            raise self.err(node, f"layout spreads over {layout.num_threads} threads but the kernel has "
                           f"{self.tr.num_threads}", "match the warp grid to the kernel's threads", ShapeError)
        return layout

    def b_zeros(self, node, shape, dtype=dt.f32, layout=None):
        shape, dtype = self.const_shape(shape, node), self.dtype(dtype, node)
        layout = self._layout_arg(layout, shape, dtype, node)
        return self.make("zeros", self.reg(dtype, shape, layout, node), node, shape=shape, dtype=dtype, layout=layout)

    def b_full(self, node, shape, value, dtype=dt.f32, layout=None):
        shape, dtype = self.const_shape(shape, node), self.dtype(dtype, node)
        layout = self._layout_arg(layout, shape, dtype, node)
        v = self.expr(value, node)
        if not isinstance(v.type, ScalarType) or not v.type.uniform:
            raise self.err(node, "tp.full needs a uniform scalar value", cls=KernelTypeError)
        return self.make("full", self.reg(dtype, shape, layout, node), node, v, shape=shape, dtype=dtype,
                         layout=layout)

    def b_arange(self, node, n, layout=None):
        n = self.const_int(n, node, "tp.arange length")
        layout = self._layout_arg(layout, (n,), dt.i32, node)
        return self.make("arange", self.reg(dt.i32, (n,), layout, node), node, n=n, layout=layout)

    def b_mbarrier(self, node, count=1, stages=None):
        count = self.const_int(count, node, "mbarrier count")
        if stages is not None:
            stages = self.const_int(stages, node, "mbarrier stages")
            if stages < 1:
                raise self.err(node, f"an mbarrier array needs stages >= 1, got {stages}", cls=ConstexprError)
        self.tr.shared_bytes += 8 * (stages or 1)  # one 64-bit mbarrier object in shared memory per stage
        return self.make("mbarrier", MBarrierType(count, stages), node, count=count, stages=stages)

    # ------------------------------------------------------------ memory
    def _view_arg(self, value, node, what, spaces=("global", "shared")):
        t = value.type if isinstance(value, ir.Expr) else None
        if isinstance(t, GlobalTileType) and "global" in spaces:
            return value
        if isinstance(t, SharedType) and "shared" in spaces:
            if t.stages is not None:
                raise self.err(node, f"{what} is a multi-stage shared tile", "index the stage: a_s[k % STAGES]",
                               KernelTypeError)
            return value
        if isinstance(t, TensorType):
            raise self.err(node, f"{what} is a whole tensor", "slice a tile: A[i0:i0 + BM, k0:k0 + BK]",
                           KernelTypeError)
        want = " or ".join({"global": "a global tile (A[i:i+B])", "shared": "a shared tile"}[s] for s in spaces)
        raise self.err(node, f"{what} must be {want}, got {_show(value)}", cls=KernelTypeError)

    def _mask_arg(self, mask, shape, node):
        if mask is None:
            return None
        if not (isinstance(mask, ir.Expr) and isinstance(mask.type, RegType) and mask.type.dtype == dt.bool_):
            raise self.err(node, f"mask must be a boolean tile, got {_show(mask)}",
                           "build it from comparisons such as tp.arange(BN) < n", KernelTypeError)
        if _broadcast(shape, mask.type.shape) != tuple(shape):
            raise self.err(node, f"mask shape {mask.type.shape} does not broadcast to {shape}", cls=ShapeError)
        return mask

    def b_load(self, node, src, mask=None, other=0, layout=None, *, cta=None):
        src = self._view_arg(src, node, "tp.load's source")
        t = src.type
        if cta is not None:
            cta = self._remote_rank(cta, src, node)
        # a gather reads element by element (no vector width to serve): lay it out as f32 tiles are, the
        # usual next step (x.to(tp.f32) then arithmetic) then needs no redistribution
        layout = self._layout_arg(layout, t.shape, dt.f32 if isinstance(t, GatherTileType) else t.dtype, node)
        args = [src]
        mask = self._mask_arg(mask, t.shape, node)
        other_e = self._weak_const(other, t, node) if not isinstance(other, ir.Expr) else other
        extra = {} if cta is None else {"cta": cta}
        return self.make("load", self.reg(t.dtype, t.shape, layout, node), node, *args, other_e,
                         *( [mask] if mask is not None else []), layout=layout, masked=mask is not None, **extra)

    def _remote_rank(self, cta, src, node) -> int:
        """load(shared tile, cta=r): the same allocation in block r of the cluster (distributed shared memory); r a
        compile-time int. Blocks of a cluster run one kernel, so the analyses read it as the block's own tile; the
        cluster check (tilepy_verify) asks for a tp.cluster_sync() before (the other block wrote it) and after (it
        must not exit while this block reads it)."""
        if self.tr.cluster_size == 1:
            raise self.err(node, "tp.load(..., cta=r) reads another CTA's shared memory, but this kernel has no "
                           "cluster", "declare one: @tp.kernel(cluster=(1, 1, 2))", KernelTypeError)
        if not self.tr.target.has("cluster"):
            raise self.err(node, f"tp.load(..., cta=) needs `cluster`, which target {self.tr.target.name} does not "
                           "have", cls=TargetError)
        if not isinstance(src.type, SharedType):
            raise self.err(node, "tp.load(..., cta=r) reads a shared tile of another CTA; this source is global",
                           "drop cta= for a global tile", KernelTypeError)
        if isinstance(cta, ir.Const):
            cta = cta.value
        if isinstance(cta, bool) or not isinstance(cta, int) or not 0 <= cta < self.tr.cluster_size:
            raise self.err(node, f"cta= must be a compile-time cluster rank, 0 to {self.tr.cluster_size - 1}, got "
                           f"{_show(cta)}", "pass an int or a constexpr", KernelTypeError)
        return int(cta)

    def b_store(self, node, dst, value, mask=None):
        dst = self._view_arg(dst, node, "tp.store's destination")
        t = dst.type
        value = self.tile_value(value, node, "the stored value")
        if not isinstance(value, ir.Expr) or isinstance(value.type, ScalarType):
            value = self.b_full(node, t.shape, value, t.dtype)
        vt = value.type
        if not isinstance(vt, RegType):
            raise self.err(node, f"tp.store writes a register tile, got {vt}", cls=KernelTypeError)
        if vt.shape != t.shape:
            raise self.err(node, f"storing a {vt.shape} tile into a {t.shape} destination",
                           "slice the destination to the tile's shape", ShapeError)
        if vt.dtype != t.dtype:
            value = self.make("cast", RegType(t.dtype, vt.shape, vt.layout), node, value, dtype=t.dtype)
        mask = self._mask_arg(mask, t.shape, node)
        return self.make("store", NONE, node, dst, value, *([mask] if mask is not None else []),
                         masked=mask is not None)

    def b_store_remote(self, node, dst, value, mbarrier, cta):
        """tp.store_remote(dst, value, mbarrier, cta): the register tile into the shared tile `dst` of the block of
        cluster rank `cta` (a uniform int), asynchronously (st.async): its bytes complete that block's `mbarrier`,
        of which the op is one arrival (with the tile's bytes as the transaction count). The receiving block waits
        on its mbarrier and then reads `dst`; no cluster barrier and no fence around the exchange: the writes are
        visible through the mbarrier's phase. The analyses read it as a store into the block's own `dst` that
        lands when its own `mbarrier` completes (the blocks of a cluster run one kernel)."""
        dst = self._view_arg(dst, node, "tp.store_remote's destination", ("shared",))
        t = dst.type
        if self.tr.cluster_size == 1:
            raise self.err(node, "tp.store_remote writes another CTA's shared memory, but this kernel has no cluster",
                           "declare one: @tp.kernel(cluster=(1, 1, 2))", KernelTypeError)
        if not self.tr.target.has("cluster"):
            raise self.err(node, f"tp.store_remote needs `cluster`, which target {self.tr.target.name} does not have",
                           cls=TargetError)
        if t.dtype.bytes != 4:
            raise self.err(node, f"tp.store_remote moves 32-bit elements (st.async); the destination is {t.dtype}",
                           "exchange f32 (or i32) tiles", KernelTypeError)
        value = self.tile_value(value, node, "the stored value")
        vt = value.type if isinstance(value, ir.Expr) else None
        if not isinstance(vt, RegType):
            raise self.err(node, f"tp.store_remote writes a register tile, got {_show(value)}", cls=KernelTypeError)
        if vt.shape != t.shape:
            raise self.err(node, f"storing a {vt.shape} tile into a {t.shape} destination",
                           "slice the destination to the tile's shape", ShapeError)
        if vt.dtype != t.dtype:
            value = self.make("cast", RegType(t.dtype, vt.shape, vt.layout), node, value, dtype=t.dtype)
        bar = self._bar(mbarrier, node)
        cta = self.expr(cta, node)
        if not (isinstance(cta.type, ScalarType) and cta.type.dtype.is_int and cta.type.uniform):
            raise self.err(node, "cta= must be a uniform integer cluster rank", "e.g. tp.cluster_rank() ^ 1",
                           KernelTypeError)
        return self.make("store_remote", NONE, node, dst, value, bar, cta)

    def _check_copy(self, src, dst, node):
        if isinstance(src.type, GatherTileType) or isinstance(dst.type, GatherTileType):
            raise self.err(node, "copies move rectangular windows; this is a gather/scatter (or strided) view",
                           "tp.load the gather into registers, then tp.store it", UnsupportedConstructError)
        if src.type.shape != dst.type.shape:
            raise self.err(node, f"copying a {src.type.shape} tile into {dst.type.shape}", cls=ShapeError)
        if src.type.dtype != dst.type.dtype:
            raise self.err(node, f"copy from {src.type.dtype} to {dst.type.dtype}",
                           "copies move bytes; convert with tp.load + .to(dtype) + tp.store", KernelTypeError)

    def b_copy(self, node, src, dst):
        src, dst = self._view_arg(src, node, "copy source"), self._view_arg(dst, node, "copy destination")
        if isinstance(src.type, GlobalTileType) and isinstance(dst.type, GlobalTileType):
            raise self.err(node, "global-to-global copy", "stage through a register or shared tile",
                           UnsupportedConstructError)
        self._check_copy(src, dst, node)
        return self.make("copy", NONE, node, src, dst)

    def b_copy_async(self, node, src, dst):
        src = self._view_arg(src, node, "async copy source", ("global",))
        dst = self._view_arg(dst, node, "async copy destination", ("shared",))
        self._check_copy(src, dst, node)
        return self.make("copy_async", NONE, node, src, dst)

    def b_commit_async(self, node):
        return self.make("commit_async", NONE, node)

    def b_wait_async(self, node, n=0):
        n = self.const_int(n, node, "tp.wait_async count")
        if n < 0:
            raise self.err(node, "tp.wait_async count must be >= 0", cls=ConstexprError)
        return self.make("wait_async", NONE, node, n=n)

    def b_copy_bulk(self, node, src, dst, mbarrier, fallback=True, multicast=0, by=None):
        src = self._view_arg(src, node, "bulk copy source", ("global",))
        dst = self._view_arg(dst, node, "bulk copy destination", ("shared",))
        self._check_copy(src, dst, node)
        if not (isinstance(mbarrier, ir.Expr) and isinstance(mbarrier.type, MBarrierType)):
            raise self.err(node, "tp.copy_bulk needs an mbarrier from tp.mbarrier()", cls=KernelTypeError)
        self._bar(mbarrier, node)
        if not isinstance(fallback, bool):
            raise self.err(node, f"fallback= must be a compile-time bool, got {fallback!r}",
                           "pass True/False or a tp.constexpr parameter", ConstexprError)
        attrs = {} if fallback else {"fallback": False}  # no attribute by default: existing IR keys stay
        args = [src, dst, mbarrier]
        if multicast or by is not None:
            size = self.tr.cluster_size
            mask = multicast if isinstance(multicast, int) and not isinstance(multicast, bool) else None
            if mask is None or not 0 < mask < (1 << size):
                raise self.err(node, f"multicast= must be a compile-time bit mask of cluster ranks (1 .. "
                               f"{(1 << size) - 1} for a cluster of {size}), got {_show(multicast)}",
                               "declare the cluster on the kernel (@tp.kernel(cluster=(2, 1, 1))) and pass e.g. "
                               "multicast=0b11", ConstexprError)
            if by is None:
                by = (mask & -mask).bit_length() - 1        # the lowest rank of the mask issues
            by = self.expr(by, node)
            if not (by.type.dtype.is_int and by.type.uniform):
                raise self.err(node, "by= (the cluster rank that issues the multicast) must be a uniform integer",
                               "pass e.g. by=k % 2 or a constant rank", KernelTypeError)
            attrs["multicast"] = mask
            args.append(by)
        return self.make("copy_bulk", NONE, node, *args, **attrs)

    def b_store_bulk(self, node, src, dst, fallback=True):
        src = self._view_arg(src, node, "bulk store source", ("shared",))
        dst = self._view_arg(dst, node, "bulk store destination", ("global",))
        self._check_copy(src, dst, node)
        if not isinstance(fallback, bool):
            raise self.err(node, f"fallback= must be a compile-time bool, got {fallback!r}",
                           "pass True/False or a tp.constexpr parameter", ConstexprError)
        # fallback=False: TMA only (no per-element copy compiled in beside it), as copy_bulk's
        attrs = {} if fallback else {"fallback": False}
        return self.make("store_bulk", NONE, node, src, dst, **attrs)

    def b_store_bulk_wait(self, node, src):
        src = self._view_arg(src, node, "the shared tile a bulk store reads", ("shared",))
        return self.make("store_bulk_wait", NONE, node, src)

    def b_barrier(self, node):
        return self.make("barrier", NONE, node)

    def _bar(self, bar, node):
        if not (isinstance(bar, ir.Expr) and isinstance(bar.type, MBarrierType)):
            raise self.err(node, f"expected an mbarrier, got {_show(bar)}", cls=KernelTypeError)
        if bar.type.stages is not None:
            raise self.err(node, f"this is an array of {bar.type.stages} mbarriers, not one",
                           "index it by the stage: full[k % STAGES]", KernelTypeError)
        return bar

    def b_mbarrier_arrive(self, node, bar, cta=None):
        if cta is None:
            return self.make("mbarrier_arrive", NONE, node, self._bar(bar, node))
        if self.tr.cluster_size == 1:
            raise self.err(node, "mbarrier_arrive(bar, cta=...) arrives on another CTA of a cluster, but this kernel "
                           "has no cluster", "declare one: @tp.kernel(cluster=(2, 1, 1))", KernelTypeError)
        if not self.tr.target.has("cluster"):
            raise self.err(node, f"mbarrier_arrive(..., cta=) needs `cluster`, which target {self.tr.target.name} "
                           "does not have", cls=TargetError)
        cta = self.expr(cta, node)
        if not (cta.type.dtype.is_int and cta.type.uniform):
            raise self.err(node, "cta= must be a uniform integer cluster rank", cls=KernelTypeError)
        return self.make("mbarrier_arrive", NONE, node, self._bar(bar, node), cta)

    def b_cluster_rank(self, node):
        return self.make("cluster_rank", ScalarType(dt.i32), node)

    def b_cluster_sync(self, node, relaxed=False):
        if isinstance(relaxed, ir.Const):
            relaxed = relaxed.value
        if not isinstance(relaxed, bool):
            raise self.err(node, f"tp.cluster_sync(relaxed=) is a compile-time bool, got {_show(relaxed)}",
                           cls=KernelTypeError)
        # relaxed: the barrier without its release / acquire (barrier.cluster.arrive.relaxed): an execution barrier
        # only, e.g. the closing one that keeps a block's shared memory alive until the others have read it
        return self.make("cluster_sync", NONE, node, **({"relaxed": True} if relaxed else {}))

    def b_mbarrier_wait(self, node, bar, phase):
        return self.make("mbarrier_wait", NONE, node, self._bar(bar, node), self.expr(phase, node))

