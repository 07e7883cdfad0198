"""Values that depend only on the thread id, computed at compile time.

A warp-role condition such as `tp.warpgroup_id() == 0` selects a fixed set of threads; the front end lays
tiles over that set, the renderers turn it into a thread range, and the verifier splits roles by it. All of
them evaluate the condition here, so they agree on which threads run which role."""

from __future__ import annotations

import operator

import numpy as np

from . import ir

_BINOPS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv, "%": operator.mod,
    "&": operator.and_, "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
    "!=": operator.ne, "and": np.logical_and, "or": np.logical_or,
}


def thread_leaves(thread_ids: np.ndarray, warp_size: int) -> dict:
    """Per-thread values of the thread-index builtins for the given real thread ids."""
    t = np.asarray(thread_ids)
    return {"thread_id": t, "lane_id": t % warp_size, "warp_id": t // warp_size,
            "warpgroup_id": t // (4 * warp_size)}


def static_thread_values(e, thread_ids: np.ndarray, warp_size: int, known: dict | None = None):
    """The values of expression `e` in each thread of `thread_ids` when `e` depends only on thread indices,
    constants and the variables in `known` (name -> per-thread values); None otherwise.

    >>> import numpy as np
    >>> from tilepy import dtypes as dt, ir
    >>> from tilepy.errors import UNKNOWN
    >>> from tilepy.types import ScalarType
    >>> w = ir.Call(ScalarType(dt.i32, False), UNKNOWN, "warp_id")
    >>> cond = ir.BinOp(ScalarType(dt.bool_, False), UNKNOWN, "==", w, ir.Const(ScalarType(dt.i32), UNKNOWN, 1))
    >>> static_thread_values(cond, np.arange(64), 32).nonzero()[0][[0, -1]].tolist()
    [32, 63]
    """
    known = known or {}

    def go(e):
        if isinstance(e, ir.Const):
            return e.value
        if isinstance(e, ir.Var):
            return known.get(e.name)
        if isinstance(e, ir.Call) and not e.args and e.op in ("thread_id", "lane_id", "warp_id", "warpgroup_id"):
            return thread_leaves(thread_ids, warp_size)[e.op]
        if isinstance(e, ir.BinOp) and e.op in _BINOPS:
            a, b = go(e.lhs), go(e.rhs)
            return None if a is None or b is None else _BINOPS[e.op](a, b)
        if isinstance(e, ir.UnOp) and e.op in ("not", "-", "~"):
            a = go(e.operand)
            if a is None:
                return None
            return {"not": np.logical_not, "-": operator.neg, "~": operator.invert}[e.op](a)
        return None

    return go(e)
