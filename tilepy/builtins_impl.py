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
from .builtins_compute import ComputeRules
from .builtins_gather import GatherRules
from .builtins_memory import MemoryRules
from .builtins_reduce import ReduceRules
from .builtins_shared import SharedViewRules
from .builtins_util import (
    _broadcast,
    _feature_hint,
    _insert_dim,
    _is_none,
    _is_pow2,
    _show,
    affine_difference,
)
from .errors import (
    CompileError,
    ConstexprError,
    KernelTypeError,
    ResourceError,
    ShapeError,
    TargetError,
    UnsupportedConstructError,
)
from .ops import OPS
from .tv_layout import TVLayout, blocked
from .types import GlobalTileType, MBarrierType, RegType, ScalarType, SharedType, TensorType

MAX_REGS_PER_THREAD = 255


@dataclass(frozen=True)
class BoundMethod:
    """`x.to` on a run-time value: calling it builds IR."""

    name: str
    base: Any



class BuiltinRules(SharedViewRules, MemoryRules, ComputeRules, GatherRules, ReduceRules):
    """`b_<name>` handles `tp.<name>`; the memory and compute rules live in their mixins."""

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
        if attr == "T" and isinstance(t, SharedType):
            return self.shared_permute(node, base, tuple(reversed(range(len(t.shape)))))
        if attr == "T" and isinstance(t, RegType):
            return self.b_permute(node, base, tuple(reversed(range(len(t.shape)))))
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
            if t.stages is None or any(isinstance(e.slice, cst.Slice) for e in node.slice):
                return self.shared_window(base, node)
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
        if isinstance(t, MBarrierType) and t.stages is not None:
            if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
                raise self.err(node, "index an mbarrier array by one stage index: full[k % STAGES]",
                               cls=UnsupportedConstructError)
            index = self.tr.expr(node.slice[0].slice.value)
            if not isinstance(index, ir.Expr):
                self.const_int(index, node, "mbarrier index")
                if not 0 <= index < t.stages:
                    raise self.err(node, f"mbarrier {index} is outside 0..{t.stages - 1}", cls=ShapeError)
            index = self.expr(index, node)
            if not (isinstance(index.type, ScalarType) and index.type.dtype.is_int and index.type.uniform):
                raise self.err(node, "an mbarrier array's index must be a uniform integer (the same in every "
                               "thread of the role)", "index by the stage: full[k % STAGES]", KernelTypeError)
            return self.make("mbarrier_at", MBarrierType(t.count), node, base, index)
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
            if not none_at and all(isinstance(s, cst.Slice) for s in items) and len(items) <= len(t.shape):
                return self.tile_window(base, node)
            raise self.err(node, "register tiles can only be indexed as x[:, None] / x[None, :], or sliced at "
                           "compile-time bounds (acc[:, c0:c0 + 64])",
                           "select elements with masks and tp.where, or reduce with tp.sum/tp.max",
                           UnsupportedConstructError)
        raise self.err(node, f"cannot index {t}", cls=KernelTypeError)

    def _view(self, base: ir.Expr, node: cst.Subscript):
        gather = self.gather_view(base, node)  # index tiles or strided slices (builtins_gather)
        if gather is not None:
            return gather
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

