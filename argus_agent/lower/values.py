"""Element values of the lowering: a hash-consed expression DAG over loads, constants and index values.

A lowered tensor is a function from its coordinates (index expressions) to a `V`; fusion is function
composition, so a chain of pointwise ops, views and broadcasts becomes one expression whose leaves are loads
of realized buffers. Equal sub-expressions are the same object, which keeps the DAG small when a value is
used twice (x * sigmoid(x)) and lets the renderer name each sub-expression once.
"""

from __future__ import annotations

import math

import torch

from .index import IExpr, variables

# torch dtype -> tilepy dtype name; values are computed in the "compute" dtype (half types in f32), and cast
# back where they are stored, as Inductor does.
TP_DTYPE = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64",
            torch.int32: "i32", torch.int64: "i64", torch.int8: "i8", torch.bool: "bool_", torch.uint8: "i32",
            torch.int16: "i32"}
STORAGE_OK = {torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64,
              torch.int8, torch.bool}


def compute_dtype(dt: torch.dtype) -> torch.dtype:
    if dt in (torch.float16, torch.bfloat16):
        return torch.float32
    if dt in (torch.uint8, torch.int16):
        return torch.int32
    return dt


class V:
    """One node of the value DAG: `op` with `args`, of torch dtype `dtype` (a compute dtype)."""

    __slots__ = ("op", "args", "dtype", "_hash", "_vars", "reads", "__weakref__")

    def __init__(self, op: str, args: tuple, dtype: torch.dtype):
        self.op, self.args, self.dtype = op, args, dtype
        self._hash = hash((op, args, dtype))
        vs = set()
        for a in args:
            if isinstance(a, V):
                vs |= a._vars
            elif isinstance(a, IExpr):
                vs |= {v.name for v in variables(a)}
            elif isinstance(a, tuple):
                for b in a:
                    if isinstance(b, IExpr):
                        vs |= {v.name for v in variables(b)}
        self._vars = frozenset(vs)
        # whether the value reads memory (then it is a tile in a kernel even when no loop variable moves it)
        self.reads = op in ("load", "gather") or any(isinstance(a, V) and a.reads for a in args)

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return self is other or (isinstance(other, V) and self._hash == other._hash and self.op == other.op
                                 and self.dtype == other.dtype and self.args == other.args)

    def __repr__(self):
        return f"V({self.op}, {self.dtype})"

    @property
    def vars(self) -> frozenset:
        """Names of the loop variables this value depends on."""
        return self._vars


_INTERN: dict = {}


def make(op: str, args: tuple, dtype: torch.dtype) -> V:
    v = V(op, args, dtype)
    got = _INTERN.get(v)
    if got is None:
        if len(_INTERN) > 200_000:
            _INTERN.clear()
        _INTERN[v] = v
        got = v
    return got


def const(value, dtype: torch.dtype) -> V:
    dtype = compute_dtype(dtype)
    if dtype.is_floating_point:
        value = float(value)
    elif dtype == torch.bool:
        value = bool(value)
    else:
        value = int(value)
    return make("const", (value,), dtype)


def load(buf: str, idx: IExpr, dtype: torch.dtype, conds: tuple = ()) -> V:
    """Element `idx` of the flat buffer `buf` (conds: extra validity conditions; invalid reads give 0)."""
    return make("load", (buf, idx, tuple(conds)), compute_dtype(dtype))


def index_value(e: IExpr, dtype: torch.dtype = torch.int64) -> V:
    return make("index", (e,), dtype)


def cast(x: V, dtype: torch.dtype) -> V:
    dtype = compute_dtype(dtype)
    if x.dtype == dtype:
        return x
    if x.op == "const":
        return const(x.args[0], dtype)
    return make("cast", (x,), dtype)


def is_const(x: V, value=None) -> bool:
    return x.op == "const" and (value is None or x.args[0] == value)


def call(op: str, *args: V, dtype: torch.dtype | None = None) -> V:
    """An elementwise op; operands are cast to the result dtype first except for comparisons/where."""
    if dtype is None:
        dtype = promote(args[1].dtype, args[2].dtype) if op == "where" else args[0].dtype
    dtype = compute_dtype(dtype)
    if op in COMPARE:
        common = promote(*[a.dtype for a in args])
        args = tuple(cast(a, common) for a in args)
        dtype = torch.bool
    elif op == "where":
        args = (cast(args[0], torch.bool), cast(args[1], dtype), cast(args[2], dtype))
    elif op not in ("isnan", "isinf"):
        args = tuple(cast(a, dtype) for a in args)
    if op in ("floordiv", "mod") and dtype.is_floating_point:
        q = floor(call("div", args[0], args[1]))
        return q if op == "floordiv" else call("sub", args[0], call("mul", q, args[1]))
    folded = _fold(op, args, dtype)
    if folded is not None:
        return folded
    return make(op, tuple(args), dtype)


def floor(x: V) -> V:
    """floor of a float: truncate through an integer cast, step down where that rounded up; magnitudes of
    2^23 and beyond are integers already (and may not fit the integer)."""
    t = cast(cast(x, torch.int32), x.dtype)
    down = call("sub", t, cast(call("gt", t, x), x.dtype))
    return call("where", call("ge", call("abs", x), const(8388608.0, x.dtype)), x, down)


COMPARE = {"lt", "le", "gt", "ge", "eq", "ne"}


def promote(*dts: torch.dtype) -> torch.dtype:
    out = dts[0]
    for d in dts[1:]:
        out = torch.promote_types(out, d)
    return compute_dtype(out)


def _fold(op, args, dtype):
    if op == "add":
        if is_const(args[1], 0) or is_const(args[1], 0.0):
            return args[0]
        if is_const(args[0], 0) or is_const(args[0], 0.0):
            return args[1]
    if op == "mul":
        if is_const(args[1], 1) or is_const(args[1], 1.0):
            return args[0]
        if is_const(args[0], 1) or is_const(args[0], 1.0):
            return args[1]
    if op == "sub" and (is_const(args[1], 0) or is_const(args[1], 0.0)):
        return args[0]
    if op == "div" and (is_const(args[1], 1) or is_const(args[1], 1.0)):
        return args[0]
    if op == "where" and args[0].op == "const":
        return args[1] if args[0].args[0] else args[2]
    if op in COMPARE and args[0].op == "index" and args[1].op == "const":
        known = _compare_bounds(op, args[0].args[0], args[1].args[0])
        if known is not None:
            return const(known, torch.bool)
    if op in ("logical_not", "invert") and args[0].op == "const":   # (`~True` renders as -2: fold it here)
        x = args[0].args[0]
        return const(not x, torch.bool) if op == "logical_not" or isinstance(x, bool) else const(~int(x), dtype)
    if all(a.op == "const" for a in args) and op in _PY:
        try:
            return const(_PY[op](*[a.args[0] for a in args]), dtype)
        except (ArithmeticError, ValueError):
            return None
    return None


def _compare_bounds(op, e, c):
    """`e op c` when the index expression's bounds decide it (a concatenation's seam that a shifted view
    never crosses), else None."""
    lo, hi = e.lo, e.hi
    if lo is None or hi is None:
        return None
    if op == "lt":
        return True if hi < c else False if lo >= c else None
    if op == "le":
        return True if hi <= c else False if lo > c else None
    if op == "gt":
        return True if lo > c else False if hi <= c else None
    if op == "ge":
        return True if lo >= c else False if hi < c else None
    if op == "eq" and lo == hi:
        return lo == c
    return None


_PY = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
       "neg": lambda a: -a, "sqrt": math.sqrt, "exp": math.exp, "log": math.log}


def walk(roots) -> list:
    """Every V reachable from `roots`, operands before users (each once)."""
    seen, order = set(), []
    stack = [(r, False) for r in reversed(list(roots))]
    while stack:
        v, done = stack.pop()
        if done:
            order.append(v)
            continue
        if id(v) in seen:
            continue
        seen.add(id(v))
        stack.append((v, True))
        for a in reversed(v.args):
            if isinstance(a, V) and id(a) not in seen:
                stack.append((a, False))
    return order
