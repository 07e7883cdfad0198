"""Type rules of the reductions and scans beyond sum/max/min, and of the register-tile shape changes.

`tp.prod` is a reduction op like `tp.sum`; `tp.any`/`tp.all` and `tp.argmax`/`tp.argmin` are built from the
existing ops (a max/min reduction, a compare, a select, a min reduction of indices), so every consumer
handles them already. `tp.cumsum`/`tp.cumprod` are scan ops (`scan_sum`, `scan_prod`). `tp.permute` (and
`x.T`) only renames tile dimensions: the thread-value layout is permuted with them, no data moves.
`tp.reshape` keeps the row-major order of the elements and redistributes them (through shared memory on the
GPU). `tp.broadcast_to` repeats size-1 axes.
"""

from __future__ import annotations

from . import dtypes as dt
from . import ir
from .builtins_util import _broadcast, _insert_dim, _show
from .errors import KernelTypeError, ShapeError
from .int_tuple import product
from .tv_layout import TVLayout
from .types import RegType


class ReduceRules:
    """Mixin of BuiltinRules: prod/any/all/argmax/argmin, scans, permute/reshape/broadcast_to."""

    def _reg(self, x, node, what):
        x = self.tile_value(x, node)
        if not (isinstance(x, ir.Expr) and isinstance(x.type, RegType)):
            raise self.err(node, f"{what} takes a register tile, got {_show(x)}", cls=KernelTypeError)
        return x

    def _axis(self, x, axis, node, what):
        if axis is None:
            raise self.err(node, f"{what} needs an axis", f"{what}(x, axis=0)", KernelTypeError)
        axis = self.const_int(axis, node, f"{what}'s axis")
        rank = len(x.type.shape)
        if axis < 0:
            axis += rank
        if not 0 <= axis < rank:
            raise self.err(node, f"axis {axis} is out of range for a tile of rank {rank}", cls=ShapeError)
        return axis

    # ------------------------------------------------------------ reductions
    def b_prod(self, node, x, axis=None, keepdims=False):
        x = self._reg(x, node, "tp.prod")
        return self._reduce("prod", node, x, self._axis(x, axis, node, "tp.prod"), keepdims)

    def _any_all(self, node, x, axis, keepdims, name):
        x = self._reg(x, node, f"tp.{name}")
        axis = self._axis(x, axis, node, f"tp.{name}")
        flags = x if x.type.dtype == dt.bool_ else self.binop("!=", x, 0, node)
        as_int = self.b_cast(node, flags, dt.i32)
        red = self._reduce("max_reduce" if name == "any" else "min_reduce", node, as_int, axis, keepdims)
        return self.binop("!=", red, 0, node)

    def b_any(self, node, x, axis=None, keepdims=False):
        return self._any_all(node, x, axis, keepdims, "any")

    def b_all(self, node, x, axis=None, keepdims=False):
        return self._any_all(node, x, axis, keepdims, "all")

    def _arg(self, node, x, axis, keepdims, name):
        x = self._reg(x, node, f"tp.{name}")
        axis = self._axis(x, axis, node, f"tp.{name}")
        n = x.type.shape[axis]
        best = self._reduce("max_reduce" if name == "argmax" else "min_reduce", node, x, axis, True)
        hit = self.binop("==", x, best, node)
        if x.type.dtype.is_float:  # torch: NaN is the extreme value; NaN != NaN marks it
            hit = self.binop("|", hit, self.binop("!=", x, x, node), node)
        pos = self.b_arange(node, n)
        for k in range(len(x.type.shape)):
            if k != axis:
                pos = self._expand(pos, k, node)
        idx = self.b_where(node, hit, pos, n)  # the first index that holds the extreme value
        return self._reduce("min_reduce", node, idx, axis, keepdims)

    def b_argmax(self, node, x, axis=None, keepdims=False):
        return self._arg(node, x, axis, keepdims, "argmax")

    def b_argmin(self, node, x, axis=None, keepdims=False):
        return self._arg(node, x, axis, keepdims, "argmin")

    # ------------------------------------------------------------ scans
    def _scan(self, op, node, x, axis, reverse, exclusive, what):
        x = self._reg(x, node, what)
        axis = self._axis(x, axis, node, what)
        for flag, name in ((reverse, "reverse"), (exclusive, "exclusive")):
            if not isinstance(flag, bool):
                raise self.err(node, f"{what}'s {name}= must be True or False, got {_show(flag)}",
                               cls=KernelTypeError)
        t = x.type
        dtype = t.dtype if t.dtype != dt.bool_ else dt.i32
        if dtype != t.dtype:
            x = self.b_cast(node, x, dtype)
        return self.make(op, RegType(dtype, t.shape, t.layout), node, x, axis=axis, reverse=reverse,
                         exclusive=exclusive)

    def b_cumsum(self, node, x, axis=None, reverse=False, exclusive=False):
        return self._scan("scan_sum", node, x, axis, reverse, exclusive, "tp.cumsum")

    def b_cumprod(self, node, x, axis=None, reverse=False, exclusive=False):
        return self._scan("scan_prod", node, x, axis, reverse, exclusive, "tp.cumprod")

    # ------------------------------------------------------------ shape changes
    def b_permute(self, node, x, dims):
        x = self._reg(x, node, "tp.permute")
        t = x.type
        if not isinstance(dims, tuple) or sorted(dims) != list(range(len(t.shape))):
            raise self.err(node, f"tp.permute needs a permutation of the {len(t.shape)} axes, got {_show(dims)}",
                           "tp.permute(x, (1, 0))", ShapeError)
        L = t.layout
        layout = TVLayout(tuple(L.tile[d] for d in dims), L.thread_shape, L.value_shape,
                          tuple(L.strides[d] for d in dims), f"permute({L.name}, {dims})")
        return self.make("permute", RegType(t.dtype, tuple(t.shape[d] for d in dims), layout), node, x, dims=dims)

    def b_reshape(self, node, x, shape, layout=None):
        """`layout`: the result's (default: the default layout of `shape`); when every thread then holds, value
        for value, the elements of the same row-major index as in x, the reshape moves no data."""
        x = self._reg(x, node, "tp.reshape")
        shape = self.const_shape(shape, node, "tp.reshape's shape")
        if product(shape) != product(x.type.shape):
            raise self.err(node, f"cannot reshape a {x.type.shape} tile ({product(x.type.shape)} elements) to "
                           f"{shape}", cls=ShapeError)
        layout = self._layout_arg(layout, shape, x.type.dtype, node)
        return self.make("reshape", self.reg(x.type.dtype, shape, layout, node), node, x, shape=shape)

    def b_broadcast_to(self, node, x, shape):
        x = self._reg(x, node, "tp.broadcast_to")
        shape = self.const_shape(shape, node, "tp.broadcast_to's shape")
        t = x.type
        if len(t.shape) < len(shape):
            for _ in range(len(shape) - len(t.shape)):
                t = x.type
                x = self.make("expand_dims", RegType(t.dtype, (1,) + t.shape, _insert_dim(t.layout, 0)), node, x,
                              axis=0)
        if _broadcast(tuple(shape), x.type.shape) != tuple(shape):
            raise self.err(node, f"a {x.type.shape} tile does not broadcast to {shape}", cls=ShapeError)
        if x.type.shape == tuple(shape):
            return x
        zero = self.b_zeros(node, shape, x.type.dtype)
        return self.binop("|" if x.type.dtype == dt.bool_ else "+", x, zero, node)
