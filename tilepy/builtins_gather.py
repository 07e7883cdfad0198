"""Type rules of gather/scatter views, strided windows and atomics.

`X[i_idx, j_idx]` with integer register tiles (numpy advanced indexing: the index tiles broadcast together,
a lower-rank one with leading size-1 axes;
uniform integer scalars may stand in for any index) is a gather view (`gather_view`). A strided slice
`X[n, h0:h0 + BH * S:S]` is the same view with index tiles `start + arange(size) * step`, so loads, stores
and atomics through both share one implementation in every consumer. `tp.atomic_*` read-modify-write the
elements of a window or gather view and return the old values.
"""

from __future__ import annotations

import libcst as cst

from . import dtypes as dt
from . import ir
from .builtins_util import _broadcast, _insert_dim, _show, affine_difference
from .errors import ConstexprError, KernelTypeError, ShapeError, UnsupportedConstructError
from .types import GatherTileType, GlobalTileType, RegType, ScalarType, TensorType

ATOMIC_DTYPES = (dt.f32, dt.bf16, dt.i32)
SEMANTICS = ("relaxed", "acquire", "release", "acq_rel")


class GatherRules:
    """Mixin of BuiltinRules: gather views, strided windows, atomics."""

    # ------------------------------------------------------------ views
    def gather_view(self, base: ir.Expr, node: cst.Subscript):
        """The gather view `base[...]` denotes, or None when it is an ordinary window (no index tile, no step)."""
        t: TensorType = base.type
        items = [e.slice for e in node.slice]
        if len(items) > t.rank:
            return None  # the window rule reports it
        parsed, tiles, steps = [], False, False
        for item in items:
            if isinstance(item, cst.Index):
                v = self.tr.expr(item.value)
                tiles |= isinstance(v, ir.Expr) and isinstance(v.type, RegType)
                parsed.append(("index", v))
            else:
                steps |= item.step is not None
                parsed.append(("slice", item))
        if not (tiles or steps):
            return None
        if tiles:
            return self._advanced(base, node, parsed)
        return self._strided(base, node, parsed)

    def _advanced(self, base, node, parsed):
        t: TensorType = base.type
        if any(kind == "slice" for kind, _ in parsed):
            raise self.err(node, "a tensor indexed by integer tiles cannot also be sliced",
                           "index every dimension with a tile or scalar: build the sliced axis as "
                           "tp.arange(n)[None, :] + start", UnsupportedConstructError)
        if len(parsed) != t.rank:
            raise self.err(node, f"a gather indexes every dimension: {len(parsed)} indices for a tensor of rank "
                           f"{t.rank}", "add an index (a scalar or a tile) for each dimension", ShapeError)
        indices, shape = [], None
        rank = max(len(v.type.shape) for _, v in parsed if isinstance(v, ir.Expr) and isinstance(v.type, RegType))
        for axis, (_, v) in enumerate(parsed):
            if isinstance(v, ir.Expr) and isinstance(v.type, RegType):
                while len(v.type.shape) < rank:  # numpy: a lower-rank index gets leading size-1 axes
                    v = self._expand(v, 0, node)
                if not v.type.dtype.is_int:
                    raise self.err(node, f"index tile on axis {axis} is {v.type.dtype}; gathers take integer tiles",
                                   "cast it: idx.to(tp.i32)", KernelTypeError)
                if shape is None:
                    shape = v.type.shape
                else:
                    b = _broadcast(shape, v.type.shape)
                    if b is None:
                        raise self.err(node, f"index tiles of shapes {shape} and {v.type.shape} do not broadcast",
                                       "give the index tiles size-1 axes where they are constant (idx[:, None])",
                                       ShapeError)
                    shape = b
                indices.append(v)
            else:
                indices.append(self._uniform_start(v, node))
        return self.make("gather_view", GatherTileType(t.dtype, tuple(shape)), node, base, *indices)

    def _strided(self, base, node, parsed):
        t: TensorType = base.type
        parsed = parsed + [("slice", cst.Slice(lower=None, upper=None))] * (t.rank - len(parsed))
        axes = []  # (tensor axis, start expr, step, size) of each tile axis
        scalars = {}
        for axis, (kind, v) in enumerate(parsed):
            if kind == "index":
                scalars[axis] = self._uniform_start(v, node)
                continue
            start, step, size = self._slice_extent(v, t.shape[axis], axis, node)
            axes.append((axis, start, step, size))
        shape = tuple(size for *_, size in axes)
        rank = len(shape)
        indices = []
        for axis in range(t.rank):
            if axis in scalars:
                indices.append(scalars[axis])
                continue
            pos = next(i for i, a in enumerate(axes) if a[0] == axis)
            _, start, step, size = axes[pos]
            idx = self.b_arange(node, size)
            if step != 1:
                idx = self.binop("*", idx, step, node)
            idx = self.binop("+", idx, start, node)
            for k in range(rank):  # put the axis at its position in the tile: size-1 axes elsewhere
                if k != pos:
                    idx = self._expand(idx, k, node)
            indices.append(idx)
        return self.make("gather_view", GatherTileType(t.dtype, shape), node, base, *indices)

    def _expand(self, x, axis, node):
        t = x.type
        return self.make("expand_dims", RegType(t.dtype, t.shape[:axis] + (1,) + t.shape[axis:],
                                                _insert_dim(t.layout, axis)), node, x, axis=axis)

    def _slice_extent(self, item: cst.Slice, dim, axis, node):
        """(start, step, size) of `lower:upper:step` on a tensor axis of size `dim`."""
        step = 1 if item.step is None else self.tr.expr(item.step)
        step = self.const_int(step, node, f"the step of the slice on axis {axis}")
        if step == 0:
            raise self.err(node, f"the slice on axis {axis} has step 0", cls=ShapeError)
        lower = self.tr.expr(item.lower) if item.lower is not None else None
        upper = self.tr.expr(item.upper) if item.upper is not None else None
        if lower is None and upper is None:
            if not isinstance(dim, int):
                raise self.err(node, f"`::{step}` over dimension {axis} ({dim}) has no static size",
                               f"give bounds: [start : start + SIZE * {abs(step)} : {step}]", ConstexprError)
            lower, extent = (0, dim) if step > 0 else (dim - 1, -dim)
        elif lower is None or upper is None:
            raise self.err(node, f"a strided slice on axis {axis} needs both bounds",
                           "write [start : start + SIZE * STEP : STEP] (or [start : start - SIZE : -1] to flip)",
                           ConstexprError)
        else:
            extent = affine_difference(upper, lower)
            if extent is None:
                raise self.err(node, f"the slice on axis {axis} has no compile-time size",
                               "write it as [start : start + SIZE * STEP : STEP] with SIZE and STEP constexprs",
                               ConstexprError)
        size = len(range(0, extent, step))
        if size <= 0:
            raise self.err(node, f"the slice on axis {axis} is empty", cls=ShapeError)
        return self._uniform_start(lower, node) if isinstance(lower, ir.Expr) else lower, step, size

    # ------------------------------------------------------------ atomics
    def _atomic_dst(self, dst, node, name):
        if not (isinstance(dst, ir.Expr) and isinstance(dst.type, GlobalTileType)):
            raise self.err(node, f"tp.{name} updates a global view (X[i0:i0 + B] or X[idx]), got {_show(dst)}",
                           "atomics act on global memory; index the tensor", KernelTypeError)
        if dst.type.dtype not in ATOMIC_DTYPES:
            raise self.err(node, f"tp.{name} on {dst.type.dtype} is not available",
                           "atomics take f32, bf16 or i32 tensors", KernelTypeError)
        return dst

    def _atomic_value(self, value, t, node, what):
        value = self.tile_value(value, node, what)
        if not isinstance(value, ir.Expr) or isinstance(value.type, ScalarType):
            value = self.b_full(node, t.shape, value, t.dtype)
        if not isinstance(value.type, RegType):
            raise self.err(node, f"{what} must be a register tile or a scalar, got {_show(value)}",
                           cls=KernelTypeError)
        if value.type.shape != t.shape:
            raise self.err(node, f"{what} has shape {value.type.shape}; the view is {t.shape}",
                           "give the value the view's shape", ShapeError)
        if value.type.dtype != t.dtype:
            value = self.make("cast", RegType(t.dtype, value.type.shape, value.type.layout), node, value,
                              dtype=t.dtype)
        return value

    def _sem(self, sem, node):
        if sem not in SEMANTICS:
            raise self.err(node, f"sem must be one of {', '.join(SEMANTICS)}, got {_show(sem)}",
                           cls=KernelTypeError)
        return sem

    def _atomic(self, op, node, dst, values, mask, sem):
        dst = self._atomic_dst(dst, node, op)
        t = dst.type
        values = [self._atomic_value(v, t, node, w) for v, w in values]
        mask = self._mask_arg(mask, t.shape, node)
        layout = values[-1].type.layout
        values = [v if v.type.layout == layout else self.make("convert_layout", RegType(
            v.type.dtype, v.type.shape, layout), node, v, layout=layout) for v in values]
        return self.make(op, self.reg(t.dtype, t.shape, layout, node), node, dst, *values,
                         *([mask] if mask is not None else []), sem=self._sem(sem, node), masked=mask is not None)

    def b_atomic_add(self, node, dst, value, mask=None, sem="relaxed"):
        return self._atomic("atomic_add", node, dst, [(value, "the added value")], mask, sem)

    def b_atomic_max(self, node, dst, value, mask=None, sem="relaxed"):
        return self._atomic("atomic_max", node, dst, [(value, "the value")], mask, sem)

    def b_atomic_min(self, node, dst, value, mask=None, sem="relaxed"):
        return self._atomic("atomic_min", node, dst, [(value, "the value")], mask, sem)

    def b_atomic_cas(self, node, dst, cmp, value, mask=None, sem="relaxed"):
        return self._atomic("atomic_cas", node, dst, [(cmp, "the compared value"), (value, "the new value")],
                            mask, sem)
