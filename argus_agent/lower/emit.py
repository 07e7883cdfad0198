"""Naming and rendering the values of one generated kernel body (`values.V` DAGs as tilepy source lines).

An emitter renders each value once, in first-use order, and records the kernel parameters it read (a flat
buffer, or a view of it the host passes). `_PointwiseEmitter` reads windows of the flat output index,
`_ReductionEmitter` the rows of a flat-index reduction, `_TileEmitter` windows of any view over named loop
variables (tiled reductions, scans, fused rows). The reduction kinds' neutral elements and combine/final
operations live here too (every reduction renderer uses them).
"""

from __future__ import annotations

import math

import torch

from . import values as vals
from .core import window
from .index import Div, IExpr, Mod, Sum, Var, variables
from .values import V

_BIN = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "floordiv": "//",
    "mod": "%",
    "pow": "**",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "eq": "==",
    "ne": "!=",
    "and": "&",
    "or": "|",
    "xor": "^",
    "lshift": "<<",
    "rshift": ">>",
}
_FN = {
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "abs",
    "sin",
    "cos",
    "tanh",
    "sigmoid",
    "erf",
    "exp2",
    "log2",
    "maximum",
    "minimum",
    "where",
    "silu",
}


def _tp(dtype: torch.dtype) -> str:
    return "tp." + vals.TP_DTYPE[dtype]


def _literal(v, dtype) -> str:
    if isinstance(v, bool) or dtype == torch.bool:
        return "True" if v else "False"
    if isinstance(v, float) or dtype.is_floating_point:
        v = float(v)
        if math.isnan(v):
            return 'float("nan")'
        if math.isinf(v):
            return 'float("inf")' if v > 0 else 'float("-inf")'
        return repr(v)
    return repr(int(v))


class _Emitter:
    """Names and renders the values of one kernel body."""

    def __init__(self, names: dict, index_dtype: str, shapes: dict):
        self.names = names  # buffer name -> kernel parameter name
        self.idt = index_dtype  # "i32" | "i64"
        self.shapes = shapes  # loop variable name -> rendered tile expression
        self.lines: list = []
        self.done: dict = {}
        self.k = 0
        self.params: list = []   # (buffer, None | (view name, shape)) in first-use order
        self.scalar_vars: set = set()   # loop variables that are one value per block (not tiles)

    def index(self, e: IExpr) -> str:
        if isinstance(e, Var):
            return e.name
        if isinstance(e, Div):
            return f"({self.index(e.x)} // {e.d})"
        if isinstance(e, Mod):
            return f"({self.index(e.x)} % {e.m})"
        if isinstance(e, Sum):
            if not e.terms:
                return str(e.c)
            parts = []
            for coef, a in e.terms:
                s = self.index(a)
                parts.append(s if coef == 1 else f"-{s}" if coef == -1 else f"{coef} * {s}")
            if e.c:
                parts.append(str(e.c))
            text = " + ".join(parts).replace("+ -", "- ")
            return f"({text})" if len(parts) > 1 else text
        raise TypeError(e)

    def fresh(self) -> str:
        self.k += 1
        return f"t{self.k}"

    def value(self, v: V) -> str:
        got = self.done.get(v)
        if got is not None:
            return got
        op = v.op
        if op == "const":
            return _literal(v.args[0], v.dtype)
        if op == "index":
            e = v.args[0]
            text = self.index(e)
            if not variables(e):
                return text
            if not _is_tile(v):
                return _scalar_cast(text, v.dtype)
            return f"{text}.to({_tp(v.dtype)})" if vals.TP_DTYPE[v.dtype] != self.idt else text
        args = [self.value(a) if isinstance(a, V) else a for a in v.args]
        if op == "load":
            text = self._load(v)
        elif op == "gather":
            off = self.value(v.args[1])
            if not _is_tile(v.args[1]):     # one element for the whole tile (a data index that is uniform)
                off = f"({off} + 0 * {self.anchor})"
            self.use(v.args[0])
            text = f"tp.load({self.names[v.args[0]]}[{off}])"
            text = _upcast(text, v, self.buf_dtype(v.args[0]))
        elif op == "cast":
            src = v.args[0]
            text = f"{args[0]}.to({_tp(v.dtype)})" if _is_tile(src) else _scalar_cast(args[0], v.dtype)
        elif op == "roundto":
            text = f"{args[0]}.to(tp.{v.args[1]}).to(tp.f32)"
        elif op == "neg":
            text = f"(-{args[0]})"
        elif op == "invert" or op == "logical_not":
            text = f"(~{args[0]})"
        elif op in _BIN:
            text = f"({args[0]} {_BIN[op]} {args[1]})"
        elif op in _FN:
            text = f"tp.{op}({', '.join(args)})"
        else:
            raise NotImplementedError(f"no tilepy rendering of `{op}`")
        if op in ("const",):
            return text
        name = self.fresh()
        self.lines.append(f"{name} = {text}")
        self.done[v] = name
        return name

    def buf_dtype(self, name):
        return self.buffer_dtypes[name]

    def _load(self, v: V) -> str:
        buf, idx, conds = v.args
        param = self.names[buf]
        conds, never = _static_conds(conds)
        window = self.window(idx, buf) if not conds and not never else None
        # a condition false for every element (a constant coordinate in a padding) masks the whole tile off
        mask = f"({self.anchor} < 0)" if never else self.conds(conds)
        if window is not None:
            view, text = window
            self.use(buf, view)
        else:
            self.use(buf)
            itext = self.index(idx)
            if not ({x.name for x in variables(idx)} - self.scalar_vars):
                # one element for the whole tile: index it with a tile anyway, so the value has the tile's shape
                anchor = self.anyvar(conds) if conds else self.anchor
                itext = f"({itext} + 0 * {anchor})"
            elif mask is not None and not self.mask_vars(conds) <= {x.name for x in variables(idx)}:
                extra = self.mask_vars(conds) - {x.name for x in variables(idx)}
                itext = f"({itext} + " + " + ".join(f"0 * {n}" for n in sorted(extra)) + ")"
            text = f"tp.load({param}[{itext}]" + (f", mask={mask}" if mask else "") + ")"
        return _upcast(text, v, self.buf_dtype(buf))

    def use(self, buf, view=None):
        """Record a kernel parameter: the flat buffer, or a view of it (name, shape) passed by the host."""
        key = (buf, view)
        if key not in self.params:
            self.params.append(key)

    def anyvar(self, conds):
        names = self.mask_vars(conds)
        return sorted(names)[0]

    def mask_vars(self, conds) -> set:
        out = set()
        for c in conds:
            out |= {x.name for x in variables(c[1])}
        return out

    def conds(self, conds) -> str | None:
        parts = []
        for c in conds:
            e = self.index(c[1])
            if c[0] == "ge0":
                parts.append(f"({e} >= 0)")
            elif c[0] == "lt":
                parts.append(f"({e} < {c[2]})")
            elif c[0] == "div":
                parts.append(f"({e} % {c[2]} == 0)")
        return " & ".join(parts) if parts else None

    def window(self, idx, buf):
        return None


def _static_conds(conds) -> tuple[tuple, bool]:
    """(the conditions that depend on a variable, whether a constant one is false): constant conditions (a
    1x1 conv's padding checks at coordinate 0) are decided here instead of rendered as Python booleans."""
    kept, never = [], False
    for c in conds:
        k = c[1].const if not variables(c[1]) else None
        if k is None:
            kept.append(c)
        elif not (k >= 0 if c[0] == "ge0" else k < c[2] if c[0] == "lt" else k % c[2] == 0):
            never = True
    return tuple(kept), never


def _is_tile(v: V) -> bool:
    return bool(v.vars - {"o"}) or v.reads


def _scalar_cast(text, dtype) -> str:
    return f"tp.cast({text}, {_tp(dtype)})"


def _upcast(text: str, v: V, storage: torch.dtype) -> str:
    if vals.compute_dtype(storage) != storage:
        return f"{text}.to({_tp(v.dtype)})"
    return text


class _PointwiseEmitter(_Emitter):
    def __init__(self, names, idt, numel, dtypes):
        super().__init__(names, idt, {})
        self.anchor = "i"
        self.numel = numel
        self.buffer_dtypes = dtypes

    def window(self, idx, buf):
        if isinstance(idx, Var) and idx.name == "i" and self.sizes[buf] == self.numel:
            return None, f"tp.load({self.names[buf]}[i0:i0 + BLOCK])"
        return None


class _ReductionEmitter(_Emitter):
    def __init__(self, names, idt, dtypes, M, R, sizes):
        super().__init__(names, idt, {})
        self.anchor = "m"
        self.buffer_dtypes = dtypes
        self.M, self.R, self.sizes = M, R, sizes
        self.cols = False

    def window(self, idx, buf):
        """Rows of the reduction read in place: index R*m + r on an (M, R) buffer is a 2-D window, index m
        on an (M,) buffer a 1-D one (as a column)."""
        M, R = self.M, self.R
        if self.cols:
            if isinstance(idx, Var) and idx.name == "m" and self.sizes[buf] == M:
                return None, f"tp.load({self.names[buf]}[m0:m0 + BM])[None, :]"
            return None
        if isinstance(idx, Var) and idx.name == "m" and self.sizes[buf] == M:
            return None, f"tp.load({self.names[buf]}[m0:m0 + BM])[:, None]"
        if isinstance(idx, Sum) and idx.c == 0 and len(idx.terms) == 2 and self.sizes[buf] == M * R:
            terms = {(a.name if isinstance(a, Var) else None): c for c, a in idx.terms}
            if terms.get("m") == R and terms.get("r") == 1:
                name = f"{self.names[buf]}_rows"
                return (name, (M, R)), f"tp.load({name}[m0:m0 + BM, k * BR:k * BR + BR])"
        if isinstance(idx, Var) and idx.name == "r" and self.sizes[buf] == R:
            return None, f"tp.load({self.names[buf]}[k * BR:k * BR + BR])[None, :]"
        return None


class _TileEmitter(_Emitter):
    """A 2-D tile over named loop variables: `axes` (tile order) with start and block names, and block-uniform
    `scalars`; loads whose index is a window of some view of their buffer (`core.window`) read that window."""

    def __init__(self, names, idt, dtypes, sizes, numels, axes, scalars=()):
        super().__init__(names, idt, {})
        self.buffer_dtypes = dtypes
        self.var_sizes = sizes          # loop variable -> its range
        self.numels = numels            # buffer -> numel
        self.axes = axes                # ((var, start text, block name), (var, start text, block name))
        self.scalar_vars = set(scalars)
        # a load of one element is indexed with a tile anyway: a kept axis (defined before the loop)
        self.anchor = axes[0][0] if axes[0][0] != "r" else axes[1][0]
        self.views: dict = {}

    def view(self, buf, shape) -> str:
        shape = tuple(shape)
        if len(shape) == 1:
            return self.names[buf]
        key = (buf, shape)
        if key not in self.views:
            self.views[key] = f"{self.names[buf]}_v{len(self.views)}"
        return self.views[key]

    def window(self, idx, buf):
        names = tuple(a[0] for a in self.axes)
        got = window(idx, self.var_sizes, names, tuple(self.scalar_vars), self.numels[buf])
        if got is None:
            return None
        shape, dims, scal = got
        info = {a[0]: a for a in self.axes}
        subs = []
        for k, (var, off) in enumerate(dims):
            _, start, block = info[var]
            parts = [start] + ([str(off)] if off else [])
            if k == 0:
                parts += [name if c == 1 else f"{c} * {name}" for name, c in sorted(scal.items())]
            st = " + ".join(parts)
            subs.append(f"{st}:{st} + {block}")
        name = self.view(buf, shape)
        text = f"tp.load({name}[{', '.join(subs)}])"
        present = [v for v, _ in dims]
        if len(present) == 1:
            text += "[:, None]" if present[0] == names[0] else "[None, :]"
        return ((name, tuple(shape)) if len(shape) > 1 else None), text



_INIT = {"sum": 0, "max": -math.inf, "min": math.inf, "prod": 1}
_COMBINE = {"sum": "{a} + {b}", "max": "tp.maximum({a}, {b})", "min": "tp.minimum({a}, {b})", "prod": "{a} * {b}"}
_FINAL = {"sum": "tp.sum", "max": "tp.max", "min": "tp.min", "prod": None}


def _init_literal(kind, dtype):
    v = _INIT[kind]
    if not dtype.is_floating_point:
        if kind == "max":
            v = -(2**62) if dtype == torch.int64 else -(2**31)
        elif kind == "min":
            v = 2**62 if dtype == torch.int64 else 2**31 - 1
    return _literal(v, dtype)


def _view_signature(em, out_views, buffers) -> tuple[list, list]:
    """Parameters and launch arguments: what the emitter read, then the stores' targets (buffer, shape)."""
    params, args = [], []
    for buf, view in list(em.params) + [(b, v) for b, v in out_views]:
        b = buffers[buf]
        if view is None:
            params.append(f"{buf}: tp.Tensor[{_tp(b.dtype)}, {max(1, b.numel)}]")
            args.append(buf)
        else:
            name, shape = view
            params.append(f"{name}: tp.Tensor[{_tp(b.dtype)}, {', '.join(str(n) for n in shape)}]")
            args.append(f"{buf}.view({', '.join(str(n) for n in shape)})")
    # one parameter per name (a buffer read and stored through the same view)
    seen, p2, a2 = set(), [], []
    for p, a in zip(params, args):
        if p.split(":")[0] not in seen:
            seen.add(p.split(":")[0])
            p2.append(p)
            a2.append(a)
    return p2, a2
