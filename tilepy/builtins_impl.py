"""Type rules of the builtins: each `tp.<name>(...)` call becomes a typed `ir.Call` (or a compile-time value).

`BuiltinRules.b_<name>` handles `tp.<name>`; arguments arrive translated (compile-time values or IR exprs)
and bound to the method's Python signature, so a wrong call reports which argument is wrong.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import libcst as cst

from . import dtypes as dt
from . import ir
from .errors import (
    CompileError,
    ConstexprError,
    KernelTypeError,
    ResourceError,
    ShapeError,
    TargetError,
    UnsupportedConstructError,
)
from .instructions import MmaInstr, mma_operand_layout
from .layout import Layout, Swizzle
from .ops import OPS, UNARY_MATH
from .tv_layout import TVLayout, blocked
from .types import NONE, GlobalTileType, MBarrierType, RegType, ScalarType, SharedType, TensorType

MAX_REGS_PER_THREAD = 255


@dataclass(frozen=True)
class BoundMethod:
    """`x.to` on a run-time value: calling it builds IR."""

    name: str
    base: Any


def _is_pow2(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


def _broadcast(a: tuple, b: tuple):
    if len(a) != len(b):
        return None
    out = []
    for x, y in zip(a, b):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None
    return tuple(out)


class BuiltinRules:
    def __init__(self, tr):
        self.tr = tr

    # ------------------------------------------------------------ plumbing
    def span(self, node):
        return self.tr.span(node)

    def err(self, node, msg, hint="", cls=CompileError):
        return self.tr.error(node, msg, hint, cls)

    def call(self, name: str, node: cst.Call):
        if name in ("tag", "assert_tag"):
            return self._tag_call(name, node)
        method = getattr(self, f"b_{name}", None)
        if method is None:
            if name in ("pipeline", "static_range"):
                raise self.err(node, f"tp.{name}(...) outside a for loop",
                               f"loop with `for i in tp.{name}(...)`", UnsupportedConstructError)
            raise self.err(node, f"tp.{name} is not available", cls=UnsupportedConstructError)
        args = [self.tr.expr(a.value) for a in node.args if a.keyword is None]
        kwargs = {a.keyword.value: self.tr.expr(a.value) for a in node.args if a.keyword is not None}
        try:
            inspect.signature(method).bind(node, *args, **kwargs)
        except TypeError as exc:
            params = str(inspect.signature(method)).replace("(node, ", "(")
            raise self.err(node, f"tp.{name}: {exc}", f"call it as tp.{name}{params}", KernelTypeError) from None
        return method(node, *args, **kwargs)

    def make(self, op: str, type_, node, *args, **attrs) -> ir.Call:
        feature = OPS[op].feature
        if feature and not self.tr.target.has(feature):
            raise self.err(node, f"tp.{op} needs `{feature}`, which target {self.tr.target.name} does not have",
                           _feature_hint(feature), TargetError)
        return ir.Call(type_, self.span(node), op, tuple(args), attrs)

    def expr(self, value, node) -> ir.Expr:
        return self.tr.as_expr(value, node)

    def const_int(self, value, node, what: str) -> int:
        if isinstance(value, ir.Expr) or isinstance(value, bool) or not isinstance(value, int):
            raise self.err(node, f"{what} must be a compile-time integer, got {_show(value)}",
                           "make it a tp.constexpr parameter or a literal", ConstexprError)
        return value

    def const_shape(self, value, node, what="tile shape") -> tuple[int, ...]:
        if isinstance(value, int) and not isinstance(value, bool):
            value = (value,)
        if not isinstance(value, tuple) or any(isinstance(v, ir.Expr) or not isinstance(v, int) for v in value):
            raise self.err(node, f"{what} must be a tuple of compile-time integers, got {_show(value)}",
                           "tile shapes are static: make each dimension a tp.constexpr parameter", ConstexprError)
        if any(v <= 0 for v in value):
            raise self.err(node, f"{what} {value} has a non-positive dimension", cls=ShapeError)
        return value

    def dtype(self, value, node) -> dt.DType:
        d = dt.from_any(value) if not isinstance(value, ir.Expr) else None
        if d is None:
            raise self.err(node, f"expected a dtype such as tp.f32, got {_show(value)}", cls=KernelTypeError)
        return d

    def default_layout(self, shape, dtype: dt.DType, node) -> TVLayout:
        if not all(_is_pow2(n) for n in shape):
            raise self.err(node, f"register tile shape {shape} has a dimension that is not a power of two",
                           "pad the tile to a power of two and mask the extra elements (views mask automatically)",
                           ShapeError)
        return blocked(shape, self.tr.num_threads, max(16 // dtype.bytes, 1))

    def reg(self, dtype, shape, layout, node) -> RegType:
        regs = -(-layout.num_values * max(dtype.bytes, 4) // 4)
        if regs > MAX_REGS_PER_THREAD:
            raise self.err(node, f"register tile {shape} of {dtype} needs {regs} registers per thread "
                           f"(at most {MAX_REGS_PER_THREAD})", "use a smaller tile or more threads",
                           ResourceError)
        return RegType(dtype, tuple(shape), layout)

    def tile_value(self, value, node, what="operand") -> ir.Expr:
        if isinstance(value, ir.Expr) and isinstance(value.type, GlobalTileType | SharedType):
            raise self.err(node, f"{what} is in {'global' if isinstance(value.type, GlobalTileType) else 'shared'}"
                           " memory; arithmetic works on register tiles", "load it first: x = tp.load(view)",
                           KernelTypeError)
        if isinstance(value, ir.Expr) and isinstance(value.type, TensorType):
            raise self.err(node, f"{what} is a whole global tensor", "slice a tile of it and tp.load it",
                           KernelTypeError)
        return value

    # ------------------------------------------------------------ attributes, subscripts, methods
    def attribute(self, base: ir.Expr, attr: str, node):
        t = base.type
        if attr == "shape" and isinstance(t, TensorType):
            return tuple(d if isinstance(d, int) else self.make("dim", ScalarType(dt.i32), node, base, axis=i)
                         for i, d in enumerate(t.shape))
        if attr == "shape" and hasattr(t, "shape"):
            return tuple(t.shape)
        if attr == "dtype" and hasattr(t, "dtype"):
            return t.dtype
        if attr == "to":
            return BoundMethod("cast", base)
        raise self.err(node, f"{t} has no attribute `{attr}`", cls=KernelTypeError)

    def method_call(self, method: BoundMethod, node: cst.Call):
        args = [self.tr.expr(a.value) for a in node.args]
        if method.name == "cast" and len(args) == 1:
            return self.b_cast(node, method.base, args[0])
        raise self.err(node, f".{method.name}(...) takes one dtype", cls=KernelTypeError)

    def subscript(self, base: ir.Expr, node: cst.Subscript):
        t = base.type
        if isinstance(t, TensorType):
            return self._view(base, node)
        if isinstance(t, SharedType):
            if t.stages is None:
                raise self.err(node, "this shared tile has no stages to index",
                               "allocate it with tp.shared(shape, dtype, stages=N) to index stages",
                               KernelTypeError)
            if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
                raise self.err(node, "index a staged shared tile by one stage index: a_s[k % STAGES]",
                               cls=UnsupportedConstructError)
            index = self.tr.expr(node.slice[0].slice.value)
            if not isinstance(index, ir.Expr):
                self.const_int(index, node, "stage index")
                if not 0 <= index < t.stages:
                    raise self.err(node, f"stage {index} is outside 0..{t.stages - 1}", cls=ShapeError)
            return self.make("stage", t.stage(), node, base, self.expr(index, node))
        if isinstance(t, RegType):
            items = [e.slice for e in node.slice]
            none_at = [i for i, s in enumerate(items) if isinstance(s, cst.Index) and _is_none(s.value)]
            full = all(isinstance(s, cst.Slice) and s.lower is None and s.upper is None and s.step is None
                       or i in none_at for i, s in enumerate(items))
            if len(none_at) == 1 and full and len(items) == len(t.shape) + 1:
                axis = none_at[0]
                shape = t.shape[:axis] + (1,) + t.shape[axis:]
                layout = _insert_dim(t.layout, axis)
                return self.make("expand_dims", RegType(t.dtype, shape, layout), node, base, axis=axis)
            raise self.err(node, "register tiles can only be indexed as x[:, None] / x[None, :]",
                           "select elements with masks and tp.where, or reduce with tp.sum/tp.max",
                           UnsupportedConstructError)
        raise self.err(node, f"cannot index {t}", cls=KernelTypeError)

    def _view(self, base: ir.Expr, node: cst.Subscript):
        t: TensorType = base.type
        items = [e.slice for e in node.slice]
        if len(items) > t.rank:
            raise self.err(node, f"{len(items)} indices for a tensor of rank {t.rank}", cls=ShapeError)
        starts, sizes, squeeze = [], [], []
        for axis in range(t.rank):
            item = items[axis] if axis < len(items) else cst.Slice(lower=None, upper=None)
            dim = t.shape[axis]
            if isinstance(item, cst.Index):
                starts.append(self._uniform_start(self.tr.expr(item.value), node))
                sizes.append(1)
                squeeze.append(True)
                continue
            if item.step is not None:
                raise self.err(node, "strided slices are not supported", "slice contiguous blocks",
                               UnsupportedConstructError)
            lower = self.tr.expr(item.lower) if item.lower is not None else 0
            if item.upper is None:
                if not isinstance(dim, int) or isinstance(lower, ir.Expr):
                    raise self.err(node, f"`:` over dimension {axis} ({dim}) has no static size",
                                   f"slice a block of constant size, e.g. [i0:i0 + BLOCK] on axis {axis}",
                                   ConstexprError)
                size = dim - lower
            else:
                upper = self.tr.expr(item.upper)
                size = affine_difference(upper, lower)
                if size is None:
                    raise self.err(node, f"the slice on axis {axis} has no compile-time size",
                                   "write it as [start : start + SIZE] with SIZE a constexpr", ConstexprError)
            if size <= 0:
                raise self.err(node, f"the slice on axis {axis} is empty (size {size})", cls=ShapeError)
            starts.append(self._uniform_start(lower, node))
            sizes.append(size)
            squeeze.append(False)
        shape = tuple(s for s, q in zip(sizes, squeeze) if not q)
        return self.make("view", GlobalTileType(t.dtype, shape), node, base, *starts,
                         sizes=tuple(sizes), squeeze=tuple(squeeze))

    def _uniform_start(self, value, node) -> ir.Expr:
        start = self.expr(value, node)
        if not (isinstance(start.type, ScalarType) and start.type.dtype.is_int):
            raise self.err(node, f"tensor indices must be integer scalars, got {start.type}", cls=KernelTypeError)
        if not start.type.uniform:
            raise self.err(node, "a tile's offset depends on the thread id",
                           "tiles are block-wide: index with block ids and loop counters; give per-thread work a "
                           "layout (tp.blocked) or split threads with a warp-role branch", KernelTypeError)
        return start

    # ------------------------------------------------------------ arithmetic
    def binop(self, op: str, lhs, rhs, node):
        lhs, rhs = self.tile_value(lhs, node), self.tile_value(rhs, node)
        lt = lhs.type if isinstance(lhs, ir.Expr) else None
        rt = rhs.type if isinstance(rhs, ir.Expr) else None
        if isinstance(lt, MBarrierType) or isinstance(rt, MBarrierType):
            raise self.err(node, "arithmetic on an mbarrier", cls=KernelTypeError)
        # Python constants adopt the other side's type (weak typing), as in Triton.
        if lt is None:
            lhs = self._weak_const(lhs, rt, node)
            lt = lhs.type
        if rt is None:
            rhs = self._weak_const(rhs, lt, node)
            rt = rhs.type
        if op in ("and", "or") and (isinstance(lt, RegType) or isinstance(rt, RegType)):
            raise self.err(node, f"`{op}` on tiles", "use & and | for elementwise logic", KernelTypeError)
        result_dtype = dt.promote(lt.dtype, rt.dtype)
        if op == "/" and not result_dtype.is_float:
            result_dtype = dt.f32
        if op in ("<", "<=", ">", ">=", "==", "!=", "and", "or"):
            out_dtype = dt.bool_
        else:
            out_dtype = result_dtype
        if op in ("&", "|", "^", "<<", ">>", "//", "%") and result_dtype.is_float:
            raise self.err(node, f"`{op}` on floating-point values", "cast to an integer type first",
                           KernelTypeError)
        if isinstance(lt, ScalarType) and isinstance(rt, ScalarType):
            return ir.BinOp(ScalarType(out_dtype, lt.uniform and rt.uniform), self.span(node), op, lhs, rhs)
        return ir.BinOp(self._tile_result(out_dtype, lt, rt, node), self.span(node), op, lhs, rhs)

    def _weak_const(self, value, other_type, node):
        if isinstance(value, bool | int | float) and other_type is not None and hasattr(other_type, "dtype"):
            d = other_type.dtype
            if isinstance(value, float) and not d.is_float:
                d = dt.f32
            if isinstance(value, bool):
                d = dt.bool_
            return ir.Const(ScalarType(d), self.span(node), value)
        return self.expr(value, node)

    def _tile_result(self, dtype, lt, rt, node) -> RegType:
        tiles = [t for t in (lt, rt) if isinstance(t, RegType)]
        for t in (lt, rt):
            if isinstance(t, ScalarType) and not t.uniform:
                raise self.err(node, "mixing a per-thread scalar with a tile",
                               "build index tiles with tp.arange instead of thread ids", KernelTypeError)
        shape = tiles[0].shape if len(tiles) == 1 else _broadcast(tiles[0].shape, tiles[1].shape)
        if shape is None:
            raise self.err(node, f"tile shapes {tiles[0].shape} and {tiles[1].shape} do not broadcast",
                           "give size-1 axes where one operand is constant along it (x[:, None], keepdims=True)",
                           ShapeError)
        for t in tiles:
            if t.shape == shape:
                return self.reg(dtype, shape, t.layout, node)
        return self.reg(dtype, shape, self.default_layout(shape, dtype, node), node)

    def coerce_to(self, value: ir.Expr, old, node, name: str) -> ir.Expr:
        new = value.type
        if isinstance(old, RegType) and isinstance(new, RegType) and old.shape == new.shape:
            if old.dtype != new.dtype:
                value = ir.Call(RegType(old.dtype, new.shape, new.layout), self.span(node), "cast", (value,),
                                {"dtype": old.dtype})
            if old.layout != new.layout:
                value = ir.Call(old, self.span(node), "convert_layout", (value,), {"layout": old.layout})
            return value
        if isinstance(old, ScalarType) and isinstance(new, ScalarType):
            if old.uniform != new.uniform and old.uniform:
                raise self.err(node, f"`{name}` was the same in every thread and now depends on the thread id",
                               "use a separate variable for per-thread values", KernelTypeError)
            if old.dtype != new.dtype:
                return ir.Call(old, self.span(node), "cast", (value,), {"dtype": old.dtype})
            return value
        raise self.err(node, f"`{name}` changes type from {old} to {new}",
                       "variables keep one type (shape, dtype, memory space); use a new name", KernelTypeError)

    def scalar_minmax(self, name, args, node):
        if len(args) != 2:
            raise self.err(node, f"{name}() takes two scalars in a kernel", cls=KernelTypeError)
        a, b = (self.expr(v, node) for v in args)
        if not (isinstance(a.type, ScalarType) and isinstance(b.type, ScalarType)):
            raise self.err(node, f"{name}() on tiles", f"use tp.{name}imum(a, b) elementwise".replace(
                "maximum", "maximum"), KernelTypeError)
        return self.make(name, ScalarType(dt.promote(a.type.dtype, b.type.dtype),
                                          a.type.uniform and b.type.uniform), node, a, b)

    # ------------------------------------------------------------ loops
    def loop_header(self, node):
        if not isinstance(node, cst.Call):
            raise self.err(node, "kernels loop over range(...), tp.pipeline(...) or tp.static_range(...)",
                           cls=UnsupportedConstructError)
        fn = self.tr.expr(node.func)
        args = [self.tr.expr(a.value) for a in node.args if a.keyword is None]
        kwargs = {a.keyword.value: self.tr.expr(a.value) for a in node.args if a.keyword is not None}
        name = getattr(fn, "name", None) if not isinstance(fn, type) else None
        if fn is range:
            kind, stages = "range", None
        elif name == "pipeline":
            kind = "pipeline"
            stages = self.const_int(kwargs.pop("stages", 2), node, "pipeline stages")
            if stages < 1:
                raise self.err(node, "pipeline stages must be >= 1", cls=ConstexprError)
        elif name == "static_range":
            kind, stages = "static", None
        else:
            raise self.err(node, "kernels loop over range(...), tp.pipeline(...) or tp.static_range(...)",
                           cls=UnsupportedConstructError)
        if kwargs:
            raise self.err(node, f"unexpected keyword(s) {', '.join(kwargs)}", cls=KernelTypeError)
        if not 1 <= len(args) <= 3:
            raise self.err(node, "loops take (stop), (start, stop) or (start, stop, step)", cls=KernelTypeError)
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
        if kind == "static":
            for v, what in ((start, "start"), (stop, "stop"), (step, "step")):
                self.const_int(v, node, f"tp.static_range {what}")
        else:
            step_c = step if not isinstance(step, ir.Expr) else None
            if step_c is not None and step_c <= 0:
                raise self.err(node, "loop steps must be positive", cls=ConstexprError)
        return kind, start, stop, step, stages

    # ------------------------------------------------------------ ids and sizes
    def b_block_id(self, node, axis=0):
        return self.make("block_id", ScalarType(dt.i32), node, axis=self.const_int(axis, node, "axis"))

    def b_num_blocks(self, node, axis=0):
        return self.make("num_blocks", ScalarType(dt.i32), node, axis=self.const_int(axis, node, "axis"))

    def _thread_index(self, op, node):
        return self.make(op, ScalarType(dt.i32, uniform=False), node)

    def b_thread_id(self, node):
        return self._thread_index("thread_id", node)

    def b_lane_id(self, node):
        return self._thread_index("lane_id", node)

    def b_warp_id(self, node):
        return self._thread_index("warp_id", node)

    def b_warpgroup_id(self, node):
        return self._thread_index("warpgroup_id", node)

    def b_num_threads(self, node):
        return self.tr.num_threads

    def b_warp_size(self, node):
        return self.tr.target.warp_size

    def b_cdiv(self, node, a, b):
        if not isinstance(a, ir.Expr) and not isinstance(b, ir.Expr):
            return -(-a // b)
        a, b = self.expr(a, node), self.expr(b, node)
        return self.make("cdiv", ScalarType(dt.promote(a.type.dtype, b.type.dtype),
                                            a.type.uniform and b.type.uniform), node, a, b)

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

    def b_mbarrier(self, node, count=1):
        count = self.const_int(count, node, "mbarrier count")
        self.tr.shared_bytes += 8  # one 64-bit mbarrier object in shared memory
        return self.make("mbarrier", MBarrierType(count), node, count=count)

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

    def b_load(self, node, src, mask=None, other=0, layout=None):
        src = self._view_arg(src, node, "tp.load's source")
        t = src.type
        layout = self._layout_arg(layout, t.shape, t.dtype, node)
        args = [src]
        mask = self._mask_arg(mask, t.shape, node)
        other_e = self._weak_const(other, t, node) if not isinstance(other, ir.Expr) else other
        return self.make("load", self.reg(t.dtype, t.shape, layout, node), node, *args, other_e,
                         *( [mask] if mask is not None else []), layout=layout, masked=mask is not None)

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

    def _check_copy(self, src, dst, node):
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

    def b_copy_bulk(self, node, src, dst, mbarrier):
        src = self._view_arg(src, node, "bulk copy source", ("global",))
        dst = self._view_arg(dst, node, "bulk copy destination", ("shared",))
        self._check_copy(src, dst, node)
        if not (isinstance(mbarrier, ir.Expr) and isinstance(mbarrier.type, MBarrierType)):
            raise self.err(node, "tp.copy_bulk needs an mbarrier from tp.mbarrier()", cls=KernelTypeError)
        return self.make("copy_bulk", NONE, node, src, dst, mbarrier)

    def b_barrier(self, node):
        return self.make("barrier", NONE, node)

    def _bar(self, bar, node):
        if not (isinstance(bar, ir.Expr) and isinstance(bar.type, MBarrierType)):
            raise self.err(node, f"expected an mbarrier, got {_show(bar)}", cls=KernelTypeError)
        return bar

    def b_mbarrier_arrive(self, node, bar):
        return self.make("mbarrier_arrive", NONE, node, self._bar(bar, node))

    def b_mbarrier_wait(self, node, bar, phase):
        return self.make("mbarrier_wait", NONE, node, self._bar(bar, node), self.expr(phase, node))

    # ------------------------------------------------------------ math
    def _math_operand(self, x, node, name):
        x = self.tile_value(x, node)
        x = self.expr(x, node)
        if not x.type.dtype.is_float:
            raise self.err(node, f"tp.{name} of an integer value", f"cast first: tp.{name}(x.to(tp.f32))",
                           KernelTypeError)
        return x

    def b_cast(self, node, x, dtype):
        dtype = self.dtype(dtype, node)
        x = self.expr(self.tile_value(x, node), node)
        t = x.type
        new = RegType(dtype, t.shape, t.layout) if isinstance(t, RegType) else ScalarType(dtype, t.uniform)
        return self.make("cast", new, node, x, dtype=dtype)

    def b_where(self, node, cond, a, b):
        cond = self.expr(self.tile_value(cond, node), node)
        if cond.type.dtype != dt.bool_:
            raise self.err(node, "tp.where's condition must be boolean", "compare: x > 0", KernelTypeError)
        sel = self.binop("+", a, b, node)  # result dtype and shape of the two values
        shape_type = self._tile_result(sel.type.dtype, cond.type, sel.type, node) if isinstance(
            cond.type, RegType) or isinstance(sel.type, RegType) else sel.type
        return self.make("where", shape_type, node, cond, sel.lhs, sel.rhs)

    def _elementwise2(self, name, node, a, b):
        sel = self.binop("+", a, b, node)
        return self.make(name, sel.type, node, sel.lhs, sel.rhs)

    def b_maximum(self, node, a, b):
        return self._elementwise2("maximum", node, a, b)

    def b_minimum(self, node, a, b):
        return self._elementwise2("minimum", node, a, b)

    def _reduce(self, op, node, x, axis, keepdims):
        x = self.tile_value(x, node)
        if not (isinstance(x, ir.Expr) and isinstance(x.type, RegType)):
            raise self.err(node, f"reductions take a register tile, got {_show(x)}", cls=KernelTypeError)
        t = x.type
        axis = self.const_int(axis, node, "reduction axis")
        if axis < 0:
            axis += len(t.shape)
        if not 0 <= axis < len(t.shape):
            raise self.err(node, f"axis {axis} is out of range for a tile of rank {len(t.shape)}", cls=ShapeError)
        layout = t.layout.drop_dim(axis)
        shape = tuple(1 if d == axis else n for d, n in enumerate(t.shape))
        if not keepdims:
            shape = shape[:axis] + shape[axis + 1:]
            layout = _remove_dim(layout, axis)
        return self.make(op, RegType(t.dtype, shape, layout), node, x, axis=axis, keepdims=bool(keepdims))

    def b_sum(self, node, x, axis=None, keepdims=False):
        if axis is None:
            raise self.err(node, "tp.sum needs an axis", "tp.sum(x, axis=1)", KernelTypeError)
        return self._reduce("sum", node, x, axis, keepdims)

    def b_max(self, node, x, axis=None, keepdims=False):
        if isinstance(axis, ir.Expr | float):
            return self.b_maximum(node, x, axis)
        if axis is None:
            raise self.err(node, "tp.max needs an axis (or two values: tp.maximum(a, b))", cls=KernelTypeError)
        return self._reduce("max_reduce", node, x, axis, keepdims)

    def b_min(self, node, x, axis=None, keepdims=False):
        if isinstance(axis, ir.Expr | float):
            return self.b_minimum(node, x, axis)
        if axis is None:
            raise self.err(node, "tp.min needs an axis (or two values: tp.minimum(a, b))", cls=KernelTypeError)
        return self._reduce("min_reduce", node, x, axis, keepdims)

    def b_convert_layout(self, node, x, layout):
        x = self.tile_value(x, node)
        if not (isinstance(x, ir.Expr) and isinstance(x.type, RegType)):
            raise self.err(node, "tp.convert_layout takes a register tile", cls=KernelTypeError)
        layout = self._layout_arg(layout, x.type.shape, x.type.dtype, node)
        return self.make("convert_layout", RegType(x.type.dtype, x.type.shape, layout), node, x, layout=layout)

    # ------------------------------------------------------------ mma
    def b_mma(self, node, a, b, acc, instr=None):
        if not (isinstance(acc, ir.Expr) and isinstance(acc.type, RegType)):
            raise self.err(node, "tp.mma's accumulator must be a register tile",
                           "acc = tp.zeros((BM, BN), tp.f32, layout=tp.accumulator(instr, (BM, BN), warps))",
                           KernelTypeError)
        origin = acc.type.layout.origin
        if instr is None:
            if not origin or origin[1] != "c":
                raise self.err(node, "tp.mma cannot tell which instruction to use",
                               "give the accumulator layout=tp.accumulator(instr, shape, warps) or pass instr=",
                               KernelTypeError)
            from .instructions import ALL
            instr = ALL[origin[0]]
        if not isinstance(instr, MmaInstr):
            raise self.err(node, f"instr must be an MMA instruction such as tp.nv.mma_m16n8k16_bf16, got "
                           f"{_show(instr)}", cls=KernelTypeError)
        if not self.tr.target.has(instr.family):
            raise self.err(node, f"{instr.name} does not exist on target {self.tr.target.name}",
                           _instr_hint(instr, self.tr.target), TargetError)
        warps = origin[2] if origin else (1, 1)
        M, N = acc.type.shape
        for op, name in ((a, "A"), (b, "B")):
            if not (isinstance(op, ir.Expr) and isinstance(op.type, RegType | SharedType)):
                raise self.err(node, f"MMA operand {name} must be a register or shared tile, got {_show(op)}",
                               "stage global tiles through shared memory or tp.load them", KernelTypeError)
            if isinstance(op.type, SharedType) and op.type.stages is not None:
                raise self.err(node, f"MMA operand {name} is a multi-stage shared tile", "index the stage",
                               KernelTypeError)
            if op.type.dtype != instr.ab:
                raise self.err(node, f"MMA operand {name} is {op.type.dtype} but {instr.name} multiplies "
                               f"{instr.ab}", f"cast it with .to(tp.{instr.ab.name}) or pick another instruction",
                               KernelTypeError)
        if len(a.type.shape) != 2 or len(b.type.shape) != 2:
            raise self.err(node, "MMA operands must be 2-D tiles", cls=ShapeError)
        (am, ak), (bk, bn) = a.type.shape, b.type.shape
        if (am, bn) != (M, N) or ak != bk:
            raise self.err(node, f"MMA shapes do not agree: A {a.type.shape} @ B {b.type.shape} into acc {(M, N)}",
                           "A is (M, K), B is (K, N), acc is (M, N)", ShapeError)
        if ak % instr.k:
            raise self.err(node, f"K={ak} is not a multiple of {instr.name}'s k={instr.k}", cls=ShapeError)
        if acc.type.dtype != instr.acc:
            raise self.err(node, f"accumulator is {acc.type.dtype}; {instr.name} accumulates in {instr.acc}",
                           cls=KernelTypeError)
        if instr.smem_operands and not all(isinstance(x.type, SharedType) for x in (a, b)):
            raise self.err(node, f"{instr.name} reads A and B from shared memory", "pass shared tiles", KernelTypeError)
        expected = mma_operand_layout(instr, "c", (M, N), warps)
        if acc.type.layout.num_threads != expected.num_threads:
            raise self.err(node, "accumulator layout does not fit the instruction's warp grid", cls=ShapeError)
        return self.make("mma", acc.type, node, a, b, acc, instr=instr, warps=tuple(warps))

    def b_mma_operands(self, node, acc):
        if not (isinstance(acc, ir.Expr) and isinstance(acc.type, RegType)):
            raise self.err(node, "tp.mma_operands takes an MMA accumulator", cls=KernelTypeError)
        return self.make("mma_operands", acc.type, node, acc)

    def b_schedule(self, node, **hints):
        for k, v in hints.items():
            if isinstance(v, ir.Expr):
                raise self.err(node, f"schedule hint {k} must be a compile-time value", cls=ConstexprError)
        return self.make("schedule", NONE, node, hints=hints)

    # ------------------------------------------------------------ tags
    def _tag_call(self, name, node: cst.Call):
        pos = [a for a in node.args if a.keyword is None]
        kw = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
        if len(pos) < 2 and "fn" not in kw:
            raise self.err(node, f"tp.{name}(value, lambda ...) takes a value and a lambda", cls=KernelTypeError)
        target = self.tr.expr(pos[0].value)
        fn_node = pos[1].value if len(pos) > 1 else kw.pop("fn")
        if not isinstance(fn_node, cst.Lambda):
            raise self.err(node, f"tp.{name} needs a lambda written in place", "tp.tag(A, lambda i, j: ('A', i, j))",
                           KernelTypeError)
        fn = self.tag_fn(fn_node)
        if not isinstance(target, ir.Expr):
            raise self.err(node, f"tp.{name} applies to a tensor or tile, got {_show(target)}", cls=KernelTypeError)
        if name == "tag":
            rank = len(getattr(target.type, "shape", ()))
            if len(fn.params) != rank:
                raise self.err(fn_node, f"tag function takes {len(fn.params)} coordinates; the value has rank {rank}",
                               cls=KernelTypeError)
            return self.make("tag", NONE, node, target, fn=fn)
        message = self.tr.expr(kw["message"]) if "message" in kw else ""
        return self.make("assert_tag", NONE, node, target, fn=fn, message=message)

    def tag_fn(self, node: cst.Lambda):
        from .tagfn import build_tag_fn

        return build_tag_fn(self.tr, node)


def row_major_layout(shape) -> Layout:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return Layout(tuple(shape), tuple(reversed(strides)))


def swizzle_span(s: Swizzle) -> int:
    return 1 << (s.bits + s.base + s.shift)


def _insert_dim(layout: TVLayout, axis: int) -> TVLayout:
    zero = (tuple(0 for _ in layout.thread_shape), tuple(0 for _ in layout.value_shape))
    strides = layout.strides[:axis] + (zero,) + layout.strides[axis:]
    tile = layout.tile[:axis] + (1,) + layout.tile[axis:]
    return TVLayout(tile, layout.thread_shape, layout.value_shape, strides, layout.name)


def _remove_dim(layout: TVLayout, axis: int) -> TVLayout:
    return TVLayout(layout.tile[:axis] + layout.tile[axis + 1:], layout.thread_shape, layout.value_shape,
                    layout.strides[:axis] + layout.strides[axis + 1:], layout.name)


def affine_difference(upper, lower) -> int | None:
    """upper - lower when it is a compile-time constant (both affine in the same run-time terms)."""
    a, b = _linear(upper), _linear(lower)
    if a is None or b is None:
        return None
    keys = set(a) | set(b)
    diff = {k: a.get(k, 0) - b.get(k, 0) for k in keys}
    if any(v for k, v in diff.items() if k != ""):
        return None
    return diff.get("", 0)


def _linear(e) -> dict | None:
    """Linear form {atom key: coefficient, "": constant} of an int expression, atoms keyed structurally."""
    if isinstance(e, bool):
        return None
    if isinstance(e, int):
        return {"": e}
    if isinstance(e, ir.Const) and isinstance(e.value, int):
        return {"": e.value}
    if isinstance(e, ir.BinOp) and e.op in ("+", "-"):
        a, b = _linear(e.lhs), _linear(e.rhs)
        if a is None or b is None:
            return None
        sign = 1 if e.op == "+" else -1
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + sign * v
        return out
    if isinstance(e, ir.BinOp) and e.op == "*":
        a, b = _linear(e.lhs), _linear(e.rhs)
        if a is None or b is None:
            return None
        for const, other in ((a, b), (b, a)):
            if set(const) == {""}:
                return {k: v * const[""] for k, v in other.items()}
    if isinstance(e, ir.Expr):
        return {_key(e): 1}
    return None


def _key(e) -> str:
    if isinstance(e, ir.Var):
        return f"v:{e.name}"
    if isinstance(e, ir.Const):
        return f"c:{e.value}"
    if isinstance(e, ir.BinOp):
        return f"({_key(e.lhs)}{e.op}{_key(e.rhs)})"
    if isinstance(e, ir.UnOp):
        return f"{e.op}{_key(e.operand)}"
    if isinstance(e, ir.Call):
        return f"{e.op}({','.join(_key(a) for a in e.args)};{sorted(e.attrs.items(), key=str)})"
    return repr(e)


def _is_none(node) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _show(value) -> str:
    if isinstance(value, ir.Expr):
        return str(value.type)
    return repr(value)


def _feature_hint(feature: str) -> str:
    return {
        "cp_async": "use tp.copy(...) (synchronous) on this target",
        "bulk_copy": "use tp.copy_async(...) with commit/wait (cp.async) on this target",
        "mbarrier": "synchronize with tp.barrier() on this target",
    }.get(feature, "pick an op the target supports")


def _instr_hint(instr: MmaInstr, target) -> str:
    if target.vendor == "amd":
        return "on AMD use tp.amd.mfma_f32_32x32x8_bf16 or tp.amd.mfma_f32_16x16x16_bf16"
    if instr.family == "wgmma":
        return "on sm_80 use tp.nv.mma_m16n8k16_bf16"
    return "on NVIDIA use tp.nv.mma_m16n8k16_bf16 (or tp.nv.wgmma_* on sm_90a)"


_ = (UNARY_MATH, Any)


def _unary(name):
    def rule(self, node, x):
        if name == "abs":  # the one math op that also means something on integers
            x = self.expr(self.tile_value(x, node), node)
            return self.make(name, x.type, node, x)
        x = self._math_operand(x, node, name)
        return self.make(name, x.type, node, x)

    rule.__name__ = f"b_{name}"
    rule.__doc__ = f"tp.{name}(x): elementwise {name} of a float tile or scalar"
    return rule


for _name in UNARY_MATH:
    setattr(BuiltinRules, f"b_{_name}", _unary(_name))
