"""Products, scans and shape changes of register tiles on the CPU interpreter (a mixin of
`interpreter._Interpreter`, like interp_ops). Tiles are logical arrays, so these are numpy one-liners; the
layouts only matter to the other consumers."""

from __future__ import annotations

import numpy as np

from .interp_ops import _compute_float, _storage


class _TileOps:
    def _op_prod(self, e, ctx):
        return self._reduce(e, ctx, np.prod)

    def _scan(self, e, ctx, fn, identity):
        (x,) = self._args(e, ctx)
        axis, rev, excl = int(e.attrs["axis"]), bool(e.attrs.get("reverse")), bool(e.attrs.get("exclusive"))
        x = np.asarray(x)
        if x.dtype.kind == "f":
            x = _compute_float(x)
        if rev:
            x = np.flip(x, axis)
        r = fn(x, axis=axis, dtype=x.dtype)
        if excl:  # shift by one along the axis, the identity first
            r = np.concatenate([np.full_like(np.take(r, [0], axis=axis), identity),
                                np.take(r, np.arange(r.shape[axis] - 1), axis=axis)], axis=axis)
        if rev:
            r = np.flip(r, axis)
        return _storage(r, e.type.dtype)

    def _op_scan_sum(self, e, ctx):
        return self._scan(e, ctx, np.cumsum, 0)

    def _op_scan_prod(self, e, ctx):
        return self._scan(e, ctx, np.cumprod, 1)

    def _op_permute(self, e, ctx):
        (x,) = self._args(e, ctx)
        return np.ascontiguousarray(np.transpose(x, e.attrs["dims"]))

    def _op_reshape(self, e, ctx):
        (x,) = self._args(e, ctx)
        return np.asarray(x).reshape(e.attrs["shape"])
