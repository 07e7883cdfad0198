"""Type rules of shared-tile views: `tp.permute(s, dims)`, `tp.transpose(s)` and `s.T` on a shared tile (or
one stage of it) give the same memory with its axes permuted, as a `shared_permute` op whose type is
`SharedType.permute(dims)`; `s[r0:r0 + R, c0:c0 + C]` (compile-time starts and sizes, an integer index fixes
an axis and drops it) is a window of it, a `shared_window` op typed by `SharedType.window`. Register tiles go
on to the register-tile rules (builtins_reduce)."""

from __future__ import annotations

import libcst as cst

from . import ir
from .builtins_util import _show, affine_difference
from .errors import ConstexprError, KernelTypeError, ShapeError, UnsupportedConstructError
from .types import RegType, SharedType


class SharedViewRules:
    """Mixin of BuiltinRules (first in its bases, so `b_permute` sees shared tiles before the register rules)."""

    def shared_permute(self, node, x, dims):
        t = x.type
        if not isinstance(dims, tuple) or sorted(dims) != list(range(len(t.shape))):
            raise self.err(node, f"tp.permute needs a permutation of the {len(t.shape)} axes, got {_show(dims)}",
                           "tp.permute(s, (1, 0))", ShapeError)
        if t.stages is not None:
            raise self.err(node, "permute one stage of a multi-stage shared tile",
                           "tp.transpose(a_s[k % STAGES])", KernelTypeError)
        if tuple(dims) == tuple(range(len(t.shape))):
            return x
        return self.make("shared_permute", t.permute(tuple(dims)), node, x, dims=tuple(dims))

    def b_permute(self, node, x, dims):
        if isinstance(x, ir.Expr) and isinstance(x.type, SharedType):
            return self.shared_permute(node, x, dims)
        return super().b_permute(node, x, dims)

    def b_transpose(self, node, x):
        """`tp.transpose(x)`: the axes reversed (a 2-D tile transposed), for shared and register tiles."""
        rank = len(getattr(getattr(x, "type", None), "shape", ()) or ())
        if rank < 2:
            raise self.err(node, f"tp.transpose takes a tile of rank >= 2, got {_show(x)}", cls=KernelTypeError)
        return self.b_permute(node, x, tuple(reversed(range(rank))))

    def tile_window(self, base, node):
        """`acc[:, c0:c0 + 64]`: the sub-tile of a register tile at compile-time bounds, when every thread already
        holds its part of it (TVLayout.window: the values kept in place, no data moved), e.g. a column block of a
        wgmma accumulator, stored a piece at a time."""
        t = base.type
        items = [e.slice for e in node.slice]
        starts, sizes = [], []
        for axis, dim in enumerate(t.shape):
            item = items[axis] if axis < len(items) else cst.Slice(lower=None, upper=None)
            if item.step is not None:
                raise self.err(node, "strided slices of register tiles are not supported",
                               "slice contiguous blocks: x[:, c0:c0 + N]", UnsupportedConstructError)
            lower = self.tr.expr(item.lower) if item.lower is not None else 0
            size = dim - lower if item.upper is None and not isinstance(lower, ir.Expr) else (
                affine_difference(self.tr.expr(item.upper), lower) if item.upper is not None else None)
            if isinstance(lower, ir.Expr) or size is None:
                raise self.err(node, f"the slice's start on axis {axis} is not a compile-time constant",
                               "register tiles are sliced at constants or constexprs (acc[:, c0:c0 + 64] with c0 a "
                               "tp.static_range index)", ConstexprError)
            lower = self.const_int(lower, node, "slice start")
            if not (0 <= lower and size > 0 and lower + size <= dim):
                raise self.err(node, f"slice {lower}:{lower + size} of axis {axis} is outside the tile's {dim}",
                               cls=ShapeError)
            starts.append(lower)
            sizes.append(size)
        try:
            layout = t.layout.window(tuple(starts), tuple(sizes))
        except ValueError as ex:
            raise self.err(node, f"this slice of a {t.shape} tile in layout {t.layout.short()} is not held by the "
                           f"same threads ({ex})",
                           "slice at multiples of the layout's value steps (a wgmma accumulator: column blocks "
                           "of 8, 16, 32, ... at multiples of their width), or tp.convert_layout first",
                           ShapeError) from None
        return self.make("tile_window", RegType(t.dtype, tuple(sizes), layout), node, base, starts=tuple(starts),
                         sizes=tuple(sizes))

    def shared_window(self, base, node):
        """`s[a:a + n, b]`: the window of a shared tile (or of one stage) at compile-time starts."""
        t = base.type
        if t.stages is not None:
            raise self.err(node, "take a window of one stage of a multi-stage shared tile",
                           "a_s[k % STAGES][r0:r0 + R, :]", KernelTypeError)
        items = [e.slice for e in node.slice]
        if len(items) > len(t.shape):
            raise self.err(node, f"{len(items)} indices for a shared tile of rank {len(t.shape)}", cls=ShapeError)
        starts, sizes, squeeze = [], [], []
        for axis, dim in enumerate(t.shape):
            item = items[axis] if axis < len(items) else cst.Slice(lower=None, upper=None)
            if isinstance(item, cst.Index):
                lower, size, fixed = self.tr.expr(item.value), 1, True
            else:
                if item.step is not None:
                    raise self.err(node, "strided windows of shared tiles are not supported",
                                   "permute the tile (tp.permute) or use a padded layout", UnsupportedConstructError)
                lower = self.tr.expr(item.lower) if item.lower is not None else 0
                size = dim - lower if item.upper is None and not isinstance(lower, ir.Expr) else (
                    affine_difference(self.tr.expr(item.upper), lower) if item.upper is not None else None)
                fixed = False
            if isinstance(lower, ir.Expr) or size is None:
                raise self.err(node, f"the window's start on axis {axis} is not a compile-time constant",
                               "shared windows start at constants or constexprs (s[1:1 + BN], "
                               "tp.static_range indices); select stages at run time with a_s[k % STAGES]",
                               ConstexprError)
            starts.append(self.const_int(lower, node, "window start"))
            sizes.append(size)
            squeeze.append(fixed)
        try:
            wtype, _ = t.window(tuple(starts), tuple(sizes), tuple(squeeze))
        except ValueError as ex:
            raise self.err(node, f"shared window out of range or not expressible: {ex}",
                           "keep windows inside the tile (pad the allocation for a halo)", ShapeError) from None
        return self.make("shared_window", wtype, node, base, starts=tuple(starts), sizes=tuple(sizes),
                         squeeze=tuple(squeeze))
