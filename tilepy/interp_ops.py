"""Register values on the CPU interpreter and the ops that compute them: storage dtypes and uniform scalars,
per-thread scalars seen as tiles, elementwise arithmetic and math, casts, reductions, block/thread ids, and
the ops that build register tiles (zeros, full, arange, ...).

`_ValueOps` is mixed into `interpreter._Interpreter`, which dispatches IR ops to its `_op_<name>` methods;
the methods use the interpreter's state (`T`, `tid`, `warp`, `block`, `grid`) and helpers (`eval`, `_args`,
`_thread_map`). The module-level value helpers are shared with interp_memops and interp_mma.
"""

from __future__ import annotations

import operator

import numpy as np

from . import dtypes as dt
from .errors import InterpreterError, Span
from .instructions import round_tf32
from .interp_memory import GlobalView, MBarrier, SharedRef, TensorBuf
from .ir import BinOp, UnOp
from .ops import UNARY_MATH
from .tv_layout import TVLayout
from .types import RegType, ScalarType

I32 = ScalarType(dt.i32)

# ============================================================================================ values


class _Divergent:
    """A variable the roles of an If assigned differently: not usable after they join."""

    def __init__(self, span: Span):
        self.span = span


def _at(tile, coords: tuple, shape: tuple):
    """tile[coords] broadcast to `shape` (coords empty for a rank-0 tile)."""
    if not coords:
        return np.broadcast_to(np.asarray(tile), shape)
    return np.asarray(tile)[coords]


def _scatter(shape: tuple, coords: tuple, vals: np.ndarray, fill, dtype) -> np.ndarray:
    out = np.full(shape, fill, dtype=dtype)
    if not coords:
        if vals.size:
            out[()] = vals.ravel()[0]
        return out
    out[coords] = vals
    return out


def _storage(x, dtype: dt.DType) -> np.ndarray:
    return dt.to_storage(x, dtype)


def _scalar(v, dtype: dt.DType | None):
    """A uniform scalar result in the precision of its type, as a Python number."""
    if dtype is None or isinstance(v, _Divergent | TensorBuf | GlobalView | SharedRef | MBarrier):
        return v
    if isinstance(v, np.ndarray) and v.ndim:
        return v
    if dtype.kind == "bool":
        return bool(v)
    if dtype.is_int:
        return int(v)
    if dtype is dt.bf16:
        return float(dt.round_bf16(np.float32(v)))
    if dtype is dt.e4m3:
        return float(dt.round_e4m3(np.float32(v)))
    return float(np.asarray(v).astype(dtype.np))


def _compute_float(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return x.astype(np.float64) if x.dtype == np.float64 else x.astype(np.float32)


def _erf(x: np.ndarray) -> np.ndarray:
    try:
        import torch

        return torch.special.erf(torch.from_numpy(np.ascontiguousarray(x))).numpy()
    except ImportError:  # Numerical Recipes erfc (fractional error < 1.2e-7)
        z = np.abs(x)
        t = 1.0 / (1.0 + 0.5 * z)
        poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
            -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
                -0.82215223 + t * 0.17087277))))))))
        r = 1.0 - t * np.exp(poly)
        return np.where(x >= 0, r, -r).astype(x.dtype)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


_MATH = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "abs": np.abs, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
    "sigmoid": _sigmoid, "silu": lambda x: x * _sigmoid(x), "erf": _erf, "round_tf32": round_tf32,
}
assert set(_MATH) == set(UNARY_MATH)

_ARRAY_BIN = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide, "//": np.floor_divide,
    "%": np.mod, "**": np.power, "&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor,
    "<<": np.left_shift, ">>": np.right_shift, "<": np.less, "<=": np.less_equal, ">": np.greater,
    ">=": np.greater_equal, "==": np.equal, "!=": np.not_equal, "and": np.logical_and, "or": np.logical_or,
}
_SCALAR_BIN = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv,
    "%": operator.mod, "**": operator.pow, "&": operator.and_, "|": operator.or_, "^": operator.xor,
    "<<": operator.lshift, ">>": operator.rshift, "<": operator.lt, "<=": operator.le, ">": operator.gt,
    ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
    "and": lambda a, b: a and b, "or": lambda a, b: a or b,
}
_AXES = {"x": 0, "y": 1, "z": 2}


def _is_scalar_value(v) -> bool:
    return isinstance(v, int | float | bool | np.number | np.bool_)


# ============================================================================================ ops


class _ValueOps:
    """The register-value ops of `_Interpreter` (a mixin: see the module docstring)."""

    def _is_pt(self, v, t) -> bool:
        return isinstance(v, np.ndarray) and not isinstance(t, RegType) and v.ndim == 1 and v.shape[0] == self.T

    def _pt_to_tile(self, arr, layout: TVLayout, shape, ctx, span):
        """A per-thread scalar seen as a tile: each element takes the value of the threads holding it."""
        tids, act = self._thread_map(layout, ctx, span)
        vals = np.broadcast_to(arr[tids][:, None], (layout.num_threads, layout.num_values))
        coords = layout.coords
        out = _scatter(tuple(shape), coords, vals, 0, arr.dtype)
        back = _at(out, coords, vals.shape)
        bad = back != vals
        if act is not None:
            bad &= act[:, None]
        if bad.any():
            raise InterpreterError("a per-thread value combined with a tile differs between threads holding the "
                                   "same element; this is not representable as a tile", span)
        return out

    def _tile_operand(self, v, t, layout, shape, ctx, span):
        if self._is_pt(v, t):
            if layout is None:
                raise InterpreterError("per-thread value used in a tile op without a layout", span)
            return self._pt_to_tile(v, layout, shape, ctx, span)
        return v

    def _elementwise(self, fn, vals, types, out_type, ctx, span):
        if isinstance(out_type, RegType) or any(isinstance(t, RegType) for t in types):
            if isinstance(out_type, RegType):
                layout, shape, odt = out_type.layout, tuple(out_type.shape), out_type.dtype
            else:
                rt = next(t for t in types if isinstance(t, RegType))
                layout, shape, odt = rt.layout, tuple(rt.shape), getattr(out_type, "dtype", rt.dtype)
            vals = [self._tile_operand(v, t, layout, shape, ctx, span) for v, t in zip(vals, types)]
            r = np.asarray(fn(*vals))
            if r.shape != shape:
                r = np.broadcast_to(r, shape)
            return _storage(r, odt)
        odt = getattr(out_type, "dtype", None)
        if any(isinstance(v, np.ndarray) for v in vals):
            r = np.asarray(fn(*[np.asarray(v) for v in vals]))
            return _storage(r, odt) if odt is not None else r
        return _scalar(fn(*vals), odt)

    def _binop(self, e: BinOp, ctx):
        a, b = self.eval(e.lhs, ctx), self.eval(e.rhs, ctx)
        self._track_args(e, [a, b], ctx)
        arrays = isinstance(a, np.ndarray) or isinstance(b, np.ndarray)
        fn = _ARRAY_BIN.get(e.op) if arrays else _SCALAR_BIN.get(e.op)
        if fn is None:
            raise InterpreterError(f"unknown operator '{e.op}'", e.span)
        if arrays and e.op in ("&", "|", "^") and (np.asarray(a).dtype == bool or np.asarray(b).dtype == bool):
            fn = {"&": np.logical_and, "|": np.logical_or, "^": np.logical_xor}[e.op]
        return self._elementwise(fn, [a, b], [e.lhs.type, e.rhs.type], e.type, ctx, e.span)

    def _unop(self, e: UnOp, ctx):
        x = self.eval(e.operand, ctx)
        self._track_args(e, [x], ctx)
        if isinstance(x, np.ndarray):
            fn = {"-": np.negative, "not": np.logical_not,
                  "~": np.logical_not if x.dtype == bool else np.invert, "+": np.positive}.get(e.op)
        else:
            fn = {"-": operator.neg, "not": operator.not_, "~": operator.invert, "+": operator.pos}.get(e.op)
        if fn is None:
            raise InterpreterError(f"unknown operator '{e.op}'", e.span)
        return self._elementwise(fn, [x], [e.operand.type], e.type, ctx, e.span)

    # ------------------------------------------------------------------------------------ ids and sizes

    def _op_block_id(self, e, ctx):
        return self.block[self._axis(e)]

    def _op_num_blocks(self, e, ctx):
        return self.grid[self._axis(e)]

    @staticmethod
    def _axis(e) -> int:
        ax = e.attrs.get("axis", 0)
        return _AXES.get(ax, ax) if isinstance(ax, str) else int(ax)

    def _op_thread_id(self, e, ctx):
        return self.tid

    def _op_lane_id(self, e, ctx):
        return self.tid % self.warp

    def _op_warp_id(self, e, ctx):
        return self.tid // self.warp

    def _op_warpgroup_id(self, e, ctx):
        return self.tid // (4 * self.warp)

    def _op_dim(self, e, ctx):
        (t,) = self._args(e, ctx)
        ax = int(e.attrs.get("axis", 0))
        if isinstance(t, TensorBuf):
            return t.shape[ax]
        if isinstance(t, GlobalView | SharedRef):
            return t.shape[ax]
        raise InterpreterError(f"dim() needs a tensor, got {type(t).__name__}", e.span)

    def _scalar2(self, e, ctx, fn_scalar, fn_array):
        a, b = self._args(e, ctx)
        fn = fn_array if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else fn_scalar
        return self._elementwise(fn, [a, b], [x.type for x in e.args], e.type, ctx, e.span)

    def _op_cdiv(self, e, ctx):
        return self._scalar2(e, ctx, lambda a, b: -(-a // b), lambda a, b: -np.floor_divide(-a, b))

    def _op_min(self, e, ctx):
        return self._scalar2(e, ctx, min, np.minimum)

    def _op_max(self, e, ctx):
        return self._scalar2(e, ctx, max, np.maximum)

    # ------------------------------------------------------------------------------------ tile construction

    def _op_zeros(self, e, ctx):
        dtype = e.attrs.get("dtype") or e.type.dtype
        shape = tuple(e.attrs.get("shape") or e.type.shape)
        return np.zeros(shape, dtype=dtype.np)

    def _op_full(self, e, ctx):
        (v,) = self._args(e, ctx)
        dtype = e.attrs.get("dtype") or e.type.dtype
        shape = tuple(e.attrs.get("shape") or e.type.shape)
        if self._is_pt(v, e.args[0].type):
            layout = e.type.layout if isinstance(e.type, RegType) else e.attrs.get("layout")
            return _storage(self._pt_to_tile(v, layout, shape, ctx, e.span), dtype)
        return _storage(np.broadcast_to(np.asarray(v), shape), dtype)

    def _op_arange(self, e, ctx):
        n = int(e.attrs.get("n") or e.type.shape[0])
        dtype = e.type.dtype if isinstance(e.type, RegType) else dt.i32
        return np.arange(n).astype(dtype.np)

    def _op_expand_dims(self, e, ctx):
        (x,) = self._args(e, ctx)
        return np.expand_dims(x, int(e.attrs.get("axis", 0)))

    def _op_tile_window(self, e, ctx):
        (x,) = self._args(e, ctx)
        return x[tuple(slice(a, a + n) for a, n in zip(e.attrs["starts"], e.attrs["sizes"]))]

    def _op_convert_layout(self, e, ctx):
        (x,) = self._args(e, ctx)
        return x

    # ------------------------------------------------------------------------------------ math

    def _op_cast(self, e, ctx):
        (x,) = self._args(e, ctx)
        dtype = e.attrs.get("dtype") or e.type.dtype
        if isinstance(x, np.ndarray):
            if dtype.kind == "bool":
                return x != 0
            return _storage(x, dtype)
        return _scalar(x, dtype)

    def _op_where(self, e, ctx):
        c, a, b = self._args(e, ctx)
        return self._elementwise(lambda c, a, b: np.where(np.asarray(c, dtype=bool), a, b), [c, a, b],
                                 [x.type for x in e.args], e.type, ctx, e.span)

    def _op_maximum(self, e, ctx):
        a, b = self._args(e, ctx)
        return self._elementwise(np.maximum, [a, b], [x.type for x in e.args], e.type, ctx, e.span)

    def _op_minimum(self, e, ctx):
        a, b = self._args(e, ctx)
        return self._elementwise(np.minimum, [a, b], [x.type for x in e.args], e.type, ctx, e.span)

    def _math(self, e, ctx):
        (x,) = self._args(e, ctx)
        fn = _MATH[e.op]
        if e.op == "abs" and np.asarray(x).dtype.kind in "iub":
            return self._elementwise(np.abs, [x], [e.args[0].type], e.type, ctx, e.span)
        return self._elementwise(lambda v: fn(_compute_float(v)), [x], [e.args[0].type], e.type, ctx, e.span)

    def _reduce(self, e, ctx, fn):
        (x,) = self._args(e, ctx)
        axis = e.attrs.get("axis")
        keepdims = bool(e.attrs.get("keepdims", False))
        x = np.asarray(x)
        odt = e.type.dtype if hasattr(e.type, "dtype") else None
        if x.dtype.kind == "f":
            x = _compute_float(x)
        r = fn(x, axis=axis, keepdims=keepdims)
        if isinstance(e.type, ScalarType):
            return _scalar(r, odt)
        return _storage(r, odt) if odt is not None else r

    def _op_sum(self, e, ctx):
        return self._reduce(e, ctx, np.sum)

    def _op_max_reduce(self, e, ctx):
        return self._reduce(e, ctx, np.max)

    def _op_min_reduce(self, e, ctx):
        return self._reduce(e, ctx, np.min)
