"""Render a lowered program as one candidate module: tilepy kernels plus the host `argus_forward`.

Kernels take every tensor flat (1-D, static size); element reads are window loads where the read index is
the kernel's own flat index, and gathers (index-tile loads) everywhere else. A Pointwise kernel walks the flat
output in BLOCK-sized tiles; a Reduction kernel holds a (BM, BR) tile of (output, reduction) pairs and loops
over the reduction in BR steps, computing what does not depend on the reduction index once, before the loop.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from . import tags as lower_tags
from . import values as vals
from .core import Buffer, Pointwise, Reduction, RowFused, Scan, window
from .index import Div, IExpr, Mod, Sum, Var, variables
from .templates import (
    ConvTemplate,
    Fp32GemmTemplate,
    MatmulTemplate,
    fuse_epilogues,
    render_gemm_template,
    render_template,
)
from .values import V, walk

INT32_MAX = 2**31 - 1
HEADER = '''"""ARGUS candidate: {what}.

Lowered from the reference's core-ATen graph (torch.export). Kernels in tilepy; `argus_forward(model, *inputs)`
is the host program (allocation and launches only). Precision: {precision}.
"""

import torch

import tilepy as tp
from argus_agent.runtime import launch
'''

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


def next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


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
        window = self.window(idx, buf) if not conds else None
        mask = self.conds(conds)
        if window is not None:
            view, text = window
            self.use(buf, view)
        else:
            self.use(buf)
            itext = self.index(idx)
            if not ({x.name for x in variables(idx)} - self.scalar_vars):
                # one element for the whole tile: index it with a tile anyway, so the value has the tile's shape
                anchor = self.anyvar(conds) if mask is not None else self.anchor
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


def _kernel_params(kernel) -> tuple[list, dict]:
    """The buffers a kernel reads, and their parameter names (the buffers' own)."""
    used = []
    for v in walk([kernel.value]):
        if v.op in ("load", "gather") and v.args[0] not in used:
            used.append(v.args[0])
    names = {b: b for b in used + [kernel.out.name]}
    return used, names


def _signature(em, kernel, buffers) -> tuple[list, list]:
    """Kernel parameters and the host's launch arguments, from what the emitter read."""
    params, args = [], []
    for buf, view in em.params:
        b = buffers[buf]
        if view is None:
            params.append(f"{buf}: tp.Tensor[{_tp(b.dtype)}, {max(1, b.numel)}]")
            args.append(buf)
        else:
            name, shape = view
            params.append(f"{name}: tp.Tensor[{_tp(b.dtype)}, {', '.join(str(n) for n in shape)}]")
            args.append(f"{buf}.view({', '.join(str(n) for n in shape)})")
    out = kernel.out
    params.append(f"{out.name}: tp.Tensor[{_tp(out.dtype)}, {max(1, out.numel)}]")
    args.append(out.name)
    return params, args


def render_pointwise(k: Pointwise, kname: str, buffers: dict) -> tuple[str, list, dict]:
    n = max(1, k.out.numel)
    used, names = _kernel_params(k)
    idt = "i64" if n > INT32_MAX or any(buffers[b].numel > INT32_MAX for b in used) else "i32"
    block = min(1024, max(32, next_pow2(n)))
    em = _PointwiseEmitter(names, idt, n, {b: buffers[b].dtype for b in buffers})
    em.sizes = {b: max(1, buffers[b].numel) for b in buffers}
    value = em.value(k.value)
    store = value if _is_tile(k.value) else f"tp.full((BLOCK,), {value}, {_tp(k.value.dtype)})"
    out_dt = k.out.dtype
    if vals.compute_dtype(out_dt) != k.value.dtype or vals.compute_dtype(out_dt) != out_dt:
        store = f"{store}.to({_tp(out_dt)})"
    body = ["i0 = tp.block_id(0) * BLOCK"]
    if idt == "i64":
        body.append("i = i0.to(tp.i64) + tp.arange(BLOCK).to(tp.i64)")
    else:
        body.append("i = i0 + tp.arange(BLOCK)")
    body += em.lines
    body.append(f"tp.store({names[k.out.name]}[i0:i0 + BLOCK], {store})")
    body = lower_tags.annotate_pointwise(body, em, n)
    params, args = _signature(em, k, buffers)
    src = (
        f"@tp.kernel(threads=128)\n"
        f"def {kname}({', '.join(params)}, BLOCK: tp.constexpr = {block}):\n"
        + (f"    # {k.what}\n" if k.what else "")
        + "".join(f"    {line}\n" for line in body)
    )
    grid = f"lambda m: (tp.cdiv({n}, m['BLOCK']),)"
    return src, args, {"grid": grid}


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


def _column_reduction(value: V) -> bool:
    """Whether the reduction's main loads step by 1 along the outputs but not along the reduced index."""
    votes = 0
    for v in walk([value]):
        if v.op != "load" or not isinstance(v.args[1], Sum):
            continue
        coef = {a.name: c for c, a in v.args[1].terms if isinstance(a, Var)}
        if "r" in v.vars:
            if coef.get("m") == 1 and coef.get("r", 0) != 1:
                votes += 1
            elif coef.get("r") == 1:
                votes -= 1
    return votes > 0


def render_reduction(k: Reduction, kname: str, buffers: dict) -> tuple[str, list, dict]:
    M, R = k.M, k.R
    used, names = _kernel_params(k)
    idt = "i64" if M * R > INT32_MAX or any(buffers[b].numel > INT32_MAX for b in used) else "i32"
    final = _FINAL[k.kind]
    cols = _column_reduction(k.value)
    if cols and final is not None:
        # the outputs are contiguous in memory, the reduced index strided: outputs along the tile's fast axis
        bm = min(next_pow2(M), 128)
        br = max(1, min(next_pow2(R), 2048 // bm, 32))
    else:
        br = 1 if final is None else min(next_pow2(R), 256 if M > 1 else 1024)
        bm = max(1, min(next_pow2(M), max(1, 2048 // br)))
    dtype = k.value.dtype
    em = _ReductionEmitter(names, idt, {b: buffers[b].dtype for b in buffers}, M, R,
                           {b: max(1, buffers[b].numel) for b in buffers})
    em.cols = cols and final is not None
    mx, rx = ("[None, :]", "[:, None]") if em.cols else ("[:, None]", "[None, :]")
    tile = "(BR, BM)" if em.cols else "(BM, BR)"
    axis = 0 if em.cols else 1
    # values that do not depend on the reduction index: computed once, before the loop
    order = walk([k.value])
    pre = [v for v in order if "r" not in v.vars and v.op not in ("const",)]
    for v in pre:
        em.value(v)
    pre_lines = em.lines
    em.lines = []
    val = em.value(k.value)
    loop_lines = em.lines
    acc_t = _tp(dtype)
    init = _init_literal(k.kind, dtype)
    body = ["m0 = tp.block_id(0) * BM"]
    cast = ".to(tp.i64)" if idt == "i64" else ""
    body.append(f"m = (m0{'.to(tp.i64)' if idt == 'i64' else ''} + tp.arange(BM){cast}){mx}")
    body += pre_lines
    body.append(f"acc = tp.full({tile}, {init}, {acc_t})")
    body.append("for k in range(tp.cdiv(R, BR)):")
    inner = [f"r = (k * BR + tp.arange(BR){cast}){rx}"] + loop_lines
    v_text = val if _is_tile(k.value) else f"tp.full({tile}, {val}, {acc_t})"
    inner.append(f"acc = tp.where((m < M) & (r < R), {_COMBINE[k.kind].format(a='acc', b=v_text)}, acc)")
    body += ["    " + line for line in inner]
    if final is None:
        body.append(f"res = tp.sum(acc, axis={axis})")  # BR == 1: the column is the result
    else:
        body.append(f"res = {final}(acc, axis={axis})")
    out_dt = k.out.dtype
    res = "res" if vals.compute_dtype(out_dt) == dtype == out_dt else f"res.to({_tp(out_dt)})"
    body.append(f"tp.store({names[k.out.name]}[m0:m0 + BM], {res})")
    body = lower_tags.annotate_reduction(body, em, M, R)
    params, args = _signature(em, k, buffers)
    src = (
        f"@tp.kernel(threads=128)\n"
        f"def {kname}({', '.join(params)}, M: tp.constexpr = {M}, R: tp.constexpr = {R}, "
        f"BM: tp.constexpr = {bm}, BR: tp.constexpr = {br}):\n"
        + (f"    # {k.what}\n" if k.what else "")
        + "".join(f"    {line}\n" for line in body)
    )
    grid = f"lambda m: (tp.cdiv({M}, m['BM']),)"
    return src, args, {"grid": grid}


def _needs_i64(k, buffers) -> bool:
    """Whether a kernel's indices may pass int32 (then it takes the generic path, whose indices are i64)."""
    sizes = [k.M * k.R] + [buffers[v.args[0]].numel for v in walk([k.value]) if v.op in ("load", "gather")]
    return max(sizes) > INT32_MAX


def render_program(prog, precision: str = "fp32 (as the reference)") -> str:
    """The candidate module's source for a LoweredProgram."""
    kernels, kept = fuse_epilogues(prog.kernels, prog.buffers, prog.outputs)   # pointwise into GEMM/conv stores
    prog = dataclasses.replace(prog, kernels=kernels, buffers=kept)
    buffers = {b.name: b for b in prog.buffers}
    kernels_src, launches = [], []
    extra_temps: list = []
    templates_done = set()
    for n, k in enumerate(prog.kernels):
        if isinstance(k, (Fp32GemmTemplate, ConvTemplate)):
            srcs, lines = render_gemm_template(k, n, prog.target, buffers, templates_done)
            kernels_src += srcs
            launches += [(None, line, None) for line in lines]
            continue
        if isinstance(k, MatmulTemplate):
            src, line = render_template(k, prog.target)
            if k.kernel not in templates_done:
                kernels_src.append(src)
                templates_done.add(k.kernel)
            launches.append((None, line, None))
            continue
        if isinstance(k, (Scan, RowFused)) or (isinstance(k, Reduction) and k.mode != "generic"
                                                and not _needs_i64(k, buffers)):
            render = render_scan if isinstance(k, Scan) else render_row_fused if isinstance(k, RowFused) \
                else render_arg_reduction if k.kind.startswith("arg") else render_welford if k.kind == "welford" \
                else render_tiled_reduction
            base = f"scan_{k.kind}" if isinstance(k, Scan) else "fused_rows" if isinstance(k, RowFused) \
                else f"reduce_{k.kind}"
            parts, temps = render(k, f"k{n}_{base}", buffers)
            for b in temps:
                buffers[b.name] = b
                extra_temps.append(b)
            for src, kname, args, grid in parts:
                kernels_src.append(src)
                launches.append((kname, args, grid))
            continue
        base = "pointwise" if isinstance(k, Pointwise) else f"reduce_{k.kind}"
        kname = f"k{n}_{base}"
        if isinstance(k, Pointwise):
            src, args, info = render_pointwise(k, kname, buffers)
        else:
            src, args, info = render_reduction(k, kname, buffers)
        kernels_src.append(src)
        launches.append((kname, args, info["grid"]))
    cap = prog.captured
    user = [gi for gi in cap.inputs if gi.kind == "input"]
    arg_names = [f"x{gi.index}" for gi in user]
    host = [f"def argus_forward(model, {', '.join(arg_names)}):" if arg_names else "def argus_forward(model):"]
    dev = None
    for gi in user:
        b = prog.placeholders.get(gi.name)
        if b is None:
            if gi.value is not None:
                host.append(f"    if x{gi.index} != {gi.value!r}:")
                host.append(
                    f"        raise ValueError('argument {gi.index} was {gi.value!r} when the program was "
                    f"lowered; lower it again for x{gi.index}=' + repr(x{gi.index}))"
                )
            continue
        host.append(f"    {b.name} = x{gi.index}.contiguous().view(-1)")
        dev = dev or f"x{gi.index}.device"
    for gi in cap.inputs:
        if gi.kind in ("param", "buffer") and gi.name in prog.placeholders:
            getter = "get_parameter" if gi.kind == "param" else "get_buffer"
            host.append(
                f"    {prog.placeholders[gi.name].name} = model.{getter}({gi.target!r}).detach().contiguous().view(-1)"
            )
            dev = dev or f"{prog.placeholders[gi.name].name}.device"
    dev = dev or "torch.device('cpu')"
    host.append(f"    dev = {dev}")
    # intermediates are allocated once per (device, input shapes) and reused; outputs are fresh per call
    out_names = {b.name for b in prog.outputs}
    temps = [b for b in list(prog.buffers) + extra_temps if b.kind == "temp" and b.name not in out_names]
    for b in prog.buffers:
        if b.kind == "temp" and b.name in out_names:
            host.append(f"    {b.name} = torch.empty({max(1, b.numel)}, dtype={b.dtype}, device=dev)")
    if temps:
        shapes = ", ".join(f"tuple(x{gi.index}.shape)" for gi in user if prog.placeholders.get(gi.name))
        host.append(f"    key = (str(dev), {shapes})" if shapes else "    key = (str(dev),)")
        host.append("    got = _TEMPS.get(key)")
        host.append("    if got is None:")
        host.append("        got = _TEMPS[key] = (")
        for b in temps:
            host.append(f"            torch.empty({max(1, b.numel)}, dtype={b.dtype}, device=dev),")
        host.append("        )")
        host.append(f"    {', '.join(b.name for b in temps)}, = got")
    for kname, args, grid in launches:
        if kname is None:
            host.append(f"    {args}")
        else:
            host.append(f"    launch({kname}, {grid}, {', '.join(args)})")
    outs = [f"{b.name}.view({tuple(s)})" for b, s in zip(prog.outputs, prog.output_shapes)]
    host.append(f"    return {outs[0]}" if prog.single_output else f"    return ({', '.join(outs)},)")
    what = f"{len(prog.kernels)} kernel{'s' if len(prog.kernels) != 1 else ''} from {len(prog.ops)} core-ATen ops"
    return (
        HEADER.format(what=what, precision=precision)
        + "\n\n"
        + "\n\n".join(kernels_src)
        + "\n\n"
        + ("# intermediates per (device, input shapes): allocated on the first call, reused after\n_TEMPS = {}\n\n\n"
           if "_TEMPS" in "\n".join(host) else "")
        + "\n".join(host)
        + "\n"
    )


# ---------------------------------------------------------------- tiled reductions, scans, fused rows
TILE_ELEMS = 4096       # elements of a reduction tile per loop step (16 per thread at 256 threads)
TARGET_BLOCKS = 1024    # blocks that keep an H100 busy (132 SMs, several blocks of 256 threads each)
ROW_MAX = 16384         # the longest row a fused row kernel holds in registers (32 values per thread at 512)
SCAN_SEGMENT = 512      # a long row's scan runs as segments of this many elements, one block each
SCAN_CHUNK = 16         # elements of a row scanned per tile scan (tilepy_hip scans cost O(n) per element)


def _cdiv(a: int, b: int) -> int:
    return -(-int(a) // int(b))


def _uses(lines, name) -> bool:
    import re

    pat = re.compile(rf"\b{name}\b")
    return any(pat.search(line) for line in lines)


def _kernel_src(kname, params, consts: dict, threads: int, what: str, body: list) -> str:
    cs = "".join(f", {k}: tp.constexpr = {v}" for k, v in consts.items())
    return (f"@tp.kernel(threads={threads})\n"
            f"def {kname}({', '.join(params)}{cs}):\n"
            + (f"    # {what}\n" if what else "")
            + "".join(f"    {line}\n" for line in body))


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


def _out_view(em, buf: Buffer, shape) -> tuple:
    shape = tuple(int(n) for n in shape)
    if len(shape) == 1:
        return buf.name, (buf.name, None)
    name = em.view(buf.name, shape)
    return name, (buf.name, (name, shape))


def _split_plan(k: Reduction) -> tuple:
    """(BM or BI, BR, S, C): the tile, and S chunks of C reduced elements when the outputs alone give too
    few blocks (a second kernel then combines the S partial results)."""
    E = TILE_ELEMS
    if k.mode == "row":
        br = min(next_pow2(k.R), E)
        bm = min(next_pow2(k.M), max(1, E // br))
        nblk = _cdiv(k.M, bm)
    else:
        bm = min(next_pow2(k.I), 128)
        br = min(next_pow2(k.R), max(1, E // bm))
        nblk = _cdiv(k.I, bm) * k.O
    S = 1
    if nblk < TARGET_BLOCKS and k.R >= 4 * br and not k.extra.get("no_split"):
        S = max(1, min(_cdiv(TARGET_BLOCKS, nblk), k.R // (2 * br), 1024))
    C = _cdiv(_cdiv(k.R, S), br) * br
    return bm, br, _cdiv(k.R, C), C


def _partial_layout(k: Reduction, S: int):
    """Where split partials live: (M, S) for rows, (O, S, I) for columns, and the combine kernel's index
    of them in the reduction's own loop variables (so the combine kernel keeps the geometry, and an
    epilogue's variables mean what they meant)."""
    from .index import Var, add, scale

    r = Var("r", S)
    if k.mode == "row":   # (S, M): the store pattern of a row's partials; the small combine gathers them
        return (S, k.M), add(scale(r, k.M), Var("m", k.M))
    return (k.O, S, k.I), add(add(scale(Var("o", k.O), S * k.I), scale(r, k.I)), Var("i", k.I))


def _partial_store(em, buf, k, S, text) -> tuple[str, tuple]:
    """The first pass's store of its partial result `text` (1-D over the tile's outputs)."""
    if k.mode == "row":
        name, ov = _out_view(em, buf, (S, k.M))
        return f"tp.store({name}[s, m0:m0 + BM], {text})", ov
    name, ov = _out_view(em, buf, (k.O, S, k.I))
    return f"tp.store({name}[o, s, i0:i0 + BI], {text})", ov


def _threads(elems: int, most: int = 256) -> int:
    return max(32, min(most, next_pow2(max(1, elems // 16))))


def render_tiled_reduction(k: Reduction, kname: str, buffers: dict) -> tuple[list, list]:
    """A row- or column-mode reduction: [(source, kernel name, launch args, grid)], extra temp buffers."""
    bm, br, S, C = _split_plan(k)
    partial = None
    if S > 1:
        shape, pidx = _partial_layout(k, S)
        partial = Buffer(f"{k.out.name}_part", shape, k.value.dtype, "temp")
        buffers = dict(buffers, **{partial.name: partial})
    first = k if partial is None else dataclasses.replace(k, epilogue=None)
    src, args, grid = _tiled_kernel(first, kname, buffers, bm, br, S, C, partial)
    out = [(src, kname, args, grid)]
    if partial is None:
        return out, []
    second = dataclasses.replace(k, value=vals.load(partial.name, pidx, partial.dtype), R=S,
                                 extra=dict(k.extra, no_split=True))
    b2, r2, _, c2 = _split_plan(second)
    src2, args2, grid2 = _tiled_kernel(second, kname + "_combine", buffers, b2, r2, 1, c2, None)
    return out + [(src2, kname + "_combine", args2, grid2)], [partial]


def _tiled_kernel(k: Reduction, kname, buffers, bm, br, S, C, partial):
    row = k.mode == "row"
    used, names = _kernel_params(k)
    names = dict(names, **({partial.name: partial.name} if partial else {}))
    if k.epilogue is not None:
        names.update({v.args[0]: v.args[0] for v in walk([k.epilogue[1]]) if v.op in ("load", "gather")})
        names[k.epilogue[0].name] = k.epilogue[0].name
    dtypes = {b: buffers[b].dtype for b in buffers}
    numels = {b: max(1, buffers[b].numel) for b in buffers}
    if row:
        axes, scalars, sizes = (("m", "m0", "BM"), ("r", "r0", "BR")), (), {"m": k.M, "r": k.R}
    else:
        axes, scalars, sizes = (("r", "r0", "BR"), ("i", "i0", "BI")), ("o",), {"o": k.O, "i": k.I, "r": k.R}
    em = _TileEmitter(names, "i32", dtypes, sizes, numels, axes, scalars)
    order = walk([k.value])
    for v in order:
        if "r" not in v.vars and v.op != "const":
            em.value(v)
    pre_lines, em.lines = em.lines, []
    val = em.value(k.value)
    loop_lines = em.lines
    dtype = k.value.dtype
    acc_t = _tp(dtype)
    tile = "(BM, BR)" if row else "(BR, BI)"
    v_text = val if _is_tile(k.value) else f"tp.full({tile}, {val}, {acc_t})"
    comb = _COMBINE[k.kind].format(a="acc", b=v_text)
    if S * C != k.R:
        comb = f"tp.where(r < R, {comb}, acc)"
    rx = "[None, :]" if row else "[:, None]"
    inner = [f"r0 = {'s * C + ' if S > 1 else ''}k * BR", f"r = (r0 + tp.arange(BR)){rx}"] + loop_lines
    inner.append(f"acc = {comb}")
    body = []
    if row:
        body.append("m0 = tp.block_id(0) * BM")
        if _uses(pre_lines + inner, "m"):
            body.append("m = (m0 + tp.arange(BM))[:, None]")
    else:
        body += ["pid = tp.block_id(0)", "o = pid // NI", "i0 = (pid % NI) * BI"]
        if _uses(pre_lines + inner, "i"):
            body.append("i = (i0 + tp.arange(BI))[None, :]")
    if S > 1:
        body.append("s = tp.block_id(1)")
    body += pre_lines
    body.append(f"acc = tp.full({tile}, {_init_literal(k.kind, dtype)}, {acc_t})")
    body.append("for k in range(tp.cdiv(C, BR)):")
    body += ["    " + line for line in inner]
    final = _FINAL[k.kind] or "tp.prod"
    if k.epilogue is not None:
        return _tiled_epilogue(k, kname, buffers, em, body, final, row, bm, br, C)
    body.append(f"res = {final}(acc, axis={1 if row else 0})")
    if partial is not None:
        line, ov = _partial_store(em, partial, k, S, "res")
        body.append(line)
    elif row:
        name, ov = _out_view(em, k.out, (k.M,))
        body.append(f"tp.store({name}[m0:m0 + BM], res)")
    else:
        name, ov = _out_view(em, k.out, (k.O, k.I))
        body.append(f"tp.store({name}[o, i0:i0 + BI], res)")
    body = lower_tags.annotate_tile(body, em)
    params, args = _view_signature(em, [ov], buffers)
    consts = {"M": k.M, "R": k.R, "C": C}
    if row:
        consts.update(BM=bm, BR=br)
        grid = f"lambda m: (tp.cdiv({k.M}, m['BM']), {S})"
        threads = _threads(bm * br)
    else:
        consts.update(O=k.O, I=k.I, NI=_cdiv(k.I, bm), BI=bm, BR=br)
        grid = f"lambda m: (tp.cdiv({k.I}, m['BI']) * {k.O}, {S})"
        threads = _threads(bm * br)
    return _kernel_src(kname, params, consts, threads, k.what, body), args, grid


def _tiled_epilogue(k, kname, buffers, em, body, final, row, bm, br, C):
    """The end of a tiled reduction whose outputs feed a per-output pointwise epilogue: the result as a
    (BM, 1) or (1, BI) tile, the epilogue computed on it and stored (the result too if others read it)."""
    out_buf, value, key, store_result = k.epilogue
    body.append(f"res = {final}(acc, axis={1 if row else 0}, keepdims=True)")
    dtype = k.value.dtype
    if vals.compute_dtype(k.out.dtype) != k.out.dtype:      # read back from a half buffer: round as stored
        body.append(f"res = res.to({_tp(k.out.dtype)}).to({_tp(dtype)})")
    em.done[vals.load(k.out.name, key, k.out.dtype)] = "res"
    em.lines = []
    val = em.value(value)
    body += em.lines
    tile = "(BM, 1)" if row else "(1, BI)"
    v_text = val if _is_tile(value) else f"tp.full({tile}, {val}, {_tp(value.dtype)})"
    outs = []
    for buf, text in ([(k.out, "res")] if store_result else []) + [(out_buf, v_text)]:
        if row:
            name, ov = _out_view(em, buf, (k.M, 1))
            body.append(f"tp.store({name}[m0:m0 + BM, 0:1], {text})")
        else:
            name, ov = _out_view(em, buf, (k.O, 1, k.I))
            body.append(f"tp.store({name}[o, 0:1, i0:i0 + BI], {text})")
        outs.append(ov)
    body = lower_tags.annotate_tile(body, em)
    params, args = _view_signature(em, outs, buffers)
    consts = {"M": k.M, "R": k.R, "C": C}
    if row:
        consts.update(BM=bm, BR=br)
        grid = f"lambda m: (tp.cdiv({k.M}, m['BM']), 1)"
    else:
        consts.update(O=k.O, I=k.I, NI=_cdiv(k.I, bm), BI=bm, BR=br)
        grid = f"lambda m: (tp.cdiv({k.I}, m['BI']) * {k.O}, 1)"
    return _kernel_src(kname, params, consts, _threads(bm * br), k.what, body), args, grid


_SCAN_FN = {"sum": ("tp.cumsum", "tp.sum", "+", 0), "prod": ("tp.cumprod", "tp.prod", "*", 1)}


def render_scan(k: Scan, kname: str, buffers: dict) -> tuple[list, list]:
    """A scan along rows (I == 1) or along a strided axis (columns): chunks of the scanned axis in order
    (reverse: from the end), each a tile scan plus the carry of the chunks before it."""
    row = k.I == 1
    scan_fn, red_fn, op, neutral = _SCAN_FN[k.kind]
    dtypes = {b: buffers[b].dtype for b in buffers}
    numels = {b: max(1, buffers[b].numel) for b in buffers}
    used = []
    for v in walk([k.value]):
        if v.op in ("load", "gather") and v.args[0] not in used:
            used.append(v.args[0])
    names = {b: b for b in used + [k.out.name]}
    segs, extra_parts, extra_temps = 1, [], []
    if row:
        # the GPU's tile scan reads O(n) shared elements per element of an n-long axis: short chunks along
        # the row (the carry makes the chunks one scan); long rows split into segments scanned by their own
        # blocks, after a first kernel sums each segment (the two-pass block scan)
        bn = min(next_pow2(k.N), SCAN_CHUNK)
        bm = min(next_pow2(k.O), 32)
        if k.N >= 2 * SCAN_SEGMENT and _cdiv(k.O, bm) < TARGET_BLOCKS:
            segs = _cdiv(k.N, SCAN_SEGMENT)
            part = Buffer(f"{k.out.name}_seg", (segs, k.O), k.value.dtype, "temp")   # as split partials
            buffers = dict(buffers, **{part.name: part})
            red = Reduction(k.out, k.kind, k.value, k.O, k.N, k.what, {}, mode="row")
            b1 = min(next_pow2(k.O), max(1, TILE_ELEMS // SCAN_SEGMENT))
            src1, args1, grid1 = _tiled_kernel(red, kname + "_segments", buffers, b1, SCAN_SEGMENT, segs,
                                               SCAN_SEGMENT, part)
            extra_parts, extra_temps = [(src1, kname + "_segments", args1, grid1)], [part]
        axes, scalars, sizes = (("m", "m0", "BM"), ("r", "r0", "BN")), (), {"m": k.O, "r": k.N}
    else:
        bm = min(next_pow2(k.I), 128)
        bn = min(next_pow2(k.N), max(1, 2048 // bm))
        axes, scalars, sizes = (("r", "r0", "BN"), ("i", "i0", "BI")), ("o",), {"o": k.O, "i": k.I, "r": k.N}
    em = _TileEmitter(names, "i32", dtypes, sizes, numels, axes, scalars)
    for v in walk([k.value]):
        if "r" not in v.vars and v.op != "const":
            em.value(v)
    pre_lines, em.lines = em.lines, []
    val = em.value(k.value)
    loop_lines = em.lines
    dtype = k.value.dtype
    acc_t = _tp(dtype)
    tile = "(BM, BN)" if row else "(BN, BI)"
    v_text = val if _is_tile(k.value) else f"tp.full({tile}, {val}, {acc_t})"
    nk = _cdiv(k.N, bn) if segs == 1 else SCAN_SEGMENT // bn
    axis = 1 if row else 0
    rx = "[None, :]" if row else "[:, None]"
    seg0 = "s * L + " if segs > 1 else ""
    inner = [f"r0 = {seg0}{'(NK - 1 - k)' if k.reverse else 'k'} * BN", f"r = (r0 + tp.arange(BN)){rx}"] + loop_lines
    lit = _literal(neutral, dtype)
    ragged = k.N % bn or (segs > 1 and segs * SCAN_SEGMENT != k.N)
    inner.append(f"v = tp.where(r < N, {v_text}, {lit})" if ragged else f"v = {v_text}")
    flags = (", reverse=True" if k.reverse else "") + (", exclusive=True" if k.exclusive else "")
    inner.append(f"c = {scan_fn}(v, axis={axis}{flags}) {op} carry")
    if row:
        name, ov = _out_view(em, k.out, (k.O, k.N))
        inner.append(f"tp.store({name}[m0:m0 + BM, r0:r0 + BN], c)")
    else:
        name, ov = _out_view(em, k.out, (k.O, k.N, k.I))
        inner.append(f"tp.store({name}[o, r0:r0 + BN, i0:i0 + BI], c)")
    inner.append(f"carry = carry {op} {red_fn}(v, axis={axis}, keepdims=True)")
    body = []
    if row:
        body.append("m0 = tp.block_id(0) * BM")
        if _uses(pre_lines + inner, "m"):
            body.append("m = (m0 + tp.arange(BM))[:, None]")
    else:
        body += ["pid = tp.block_id(0)", "o = pid // NI", "i0 = (pid % NI) * BI"]
        if _uses(pre_lines + inner, "i"):
            body.append("i = (i0 + tp.arange(BI))[None, :]")
    body += pre_lines
    body.append(f"carry = tp.full({'(BM, 1)' if row else '(1, BI)'}, {lit}, {acc_t})")
    if segs > 1:
        em.names[extra_temps[0].name] = extra_temps[0].name
        pname, pov = _out_view(em, extra_temps[0], (segs, k.O))
        em.params.append(pov)
        body.append("s = tp.block_id(1)")
        body.append("for q in range(s + 1, S):" if k.reverse else "for q in range(s):")
        body.append(f"    carry = carry {op} tp.load({pname}[q, m0:m0 + BM])[:, None]")
    body.append("for k in range(NK):")
    body += ["    " + line for line in inner]
    body = lower_tags.annotate_tile(body, em)
    params, args = _view_signature(em, [ov], buffers)
    if row:
        consts = {"N": k.N, "NK": nk, "BM": bm, "BN": bn}
        if segs > 1:
            consts.update(S=segs, L=SCAN_SEGMENT)
        grid = f"lambda m: (tp.cdiv({k.O}, m['BM']), {segs})"
    else:
        consts = {"N": k.N, "NK": nk, "NI": _cdiv(k.I, bm), "BI": bm, "BN": bn}
        grid = f"lambda m: (tp.cdiv({k.I}, m['BI']) * {k.O},)"
    src = _kernel_src(kname, params, consts, _threads(bm * bn), k.what, body)
    return extra_parts + [(src, kname, args, grid)], extra_temps


def render_row_fused(k: RowFused, kname: str, buffers: dict) -> tuple[list, list]:
    """Whole rows in registers: each stage reduces the row tile (earlier stages' results are registers),
    then the output is stored per element (or per row): one read of the rows, one write."""
    M, R = k.M, k.R
    br = next_pow2(R)
    bm = max(1, min(next_pow2(M), 2048 // br))
    dtypes = {b: buffers[b].dtype for b in buffers}
    numels = {b: max(1, buffers[b].numel) for b in buffers}
    used = []
    for v in walk([st.value for st in k.stages] + [k.value]):
        if v.op in ("load", "gather") and v.args[0] not in used:
            used.append(v.args[0])
    names = {b: b for b in used + [k.out.name] + [st.out.name for st in k.stages]}
    from .index import Var

    em = _TileEmitter(names, "i32", dtypes, {"m": M, "r": R}, numels, (("m", "m0", "BM"), ("r", "r0", "BR")))
    em.lines = []
    stores = []
    outs = []
    m_var = Var("m", M)
    for j, st in enumerate(k.stages):
        val = em.value(st.value)
        dtype = st.value.dtype
        v_text = val if _is_tile(st.value) else f"tp.full((BM, BR), {val}, {_tp(dtype)})"
        if R != br:
            v_text = f"tp.where(r < R, {v_text}, {_init_literal(st.kind, dtype)})"
        name = f"s{j}"
        em.lines.append(f"{name} = {_FINAL[st.kind] or 'tp.prod'}({v_text}, axis=1, keepdims=True)")
        store_dt = st.out.dtype
        if vals.compute_dtype(store_dt) != store_dt:      # read back from a half buffer: round as stored
            em.lines.append(f"{name} = {name}.to({_tp(store_dt)}).to({_tp(dtype)})")
        em.done[vals.load(st.out.name, m_var, store_dt)] = name
        if st.out.name in k.keep:
            vname, ov = _out_view(em, st.out, (M, 1))
            stores.append(f"tp.store({vname}[m0:m0 + BM, 0:1], {name})")
            outs.append(ov)
    val = em.value(k.value)
    tile = "(BM, 1)" if k.per_row else "(BM, BR)"
    v_text = val if _is_tile(k.value) else f"tp.full({tile}, {val}, {_tp(k.value.dtype)})"
    if k.per_row:
        vname, ov = _out_view(em, k.out, (M, 1))
        stores.append(f"tp.store({vname}[m0:m0 + BM, 0:1], {v_text})")
    else:
        vname, ov = _out_view(em, k.out, (M, R))
        stores.append(f"tp.store({vname}[m0:m0 + BM, 0:BR], {v_text})")
    outs.append(ov)
    lines = em.lines + stores
    body = ["m0 = tp.block_id(0) * BM", "r0 = 0"]
    if _uses(lines, "m"):
        body.append("m = (m0 + tp.arange(BM))[:, None]")
    if _uses(lines, "r"):
        body.append("r = tp.arange(BR)[None, :]")
    body += lines
    body = lower_tags.annotate_tile(body, em)
    params, args = _view_signature(em, outs, buffers)
    consts = {"M": M, "R": R, "BM": bm, "BR": br}
    src = _kernel_src(kname, params, consts, max(128, min(512, next_pow2(bm * br // 32))), k.what, body)
    return [(src, kname, args, f"lambda m: (tp.cdiv({M}, m['BM']),)")], []


def render_arg_reduction(k: Reduction, kname: str, buffers: dict) -> tuple[list, list]:
    """argmax/argmin along a strided axis in one pass: each tile lane keeps its extreme value and the first
    index holding it (a NaN is the extreme, as in torch); the lanes then agree on the smallest index of the
    extreme. Too few outputs for the GPU: S partial (value, index) pairs, combined by a second kernel."""

    bi, br, S, C = _split_plan(k)
    if S == 1:
        return [_arg_kernel(k, kname, buffers, bi, br, 1, C, None, (k.out2, k.out))], []
    shape, idx = _partial_layout(k, S)
    pv = Buffer(f"{k.out2.name}_part", shape, k.value.dtype, "temp")
    pi = Buffer(f"{k.out.name}_part", shape, torch.int64, "temp")
    buffers = dict(buffers, **{pv.name: pv, pi.name: pi})
    first = _arg_kernel(k, kname, buffers, bi, br, S, C, None, (pv, pi))
    second = dataclasses.replace(k, value=vals.load(pv.name, idx, pv.dtype), R=S, extra={"no_split": True})
    b2, r2, _, c2 = _split_plan(second)
    combine = _arg_kernel(second, kname + "_combine", buffers, b2, r2, 1, c2, vals.load(pi.name, idx, torch.int64),
                          (k.out2, k.out))
    return [first, combine], [pv, pi]


def _arg_kernel(k, kname, buffers, bi, br, S, C, index_v, targets):
    names = {}
    for v in walk([k.value] + ([index_v] if index_v is not None else [])):
        if v.op in ("load", "gather"):
            names[v.args[0]] = v.args[0]
    for b in targets:
        names[b.name] = b.name
    dtypes = {b: buffers[b].dtype for b in buffers}
    numels = {b: max(1, buffers[b].numel) for b in buffers}
    em = _TileEmitter(names, "i32", dtypes, {"o": k.O, "i": k.I, "r": k.R}, numels,
                      (("r", "r0", "BR"), ("i", "i0", "BI")), ("o",))
    for v in walk([k.value]):
        if "r" not in v.vars and v.op != "const":
            em.value(v)
    pre_lines, em.lines = em.lines, []
    val = em.value(k.value)
    ind = em.value(index_v) if index_v is not None else "r.to(tp.i64)"
    loop_lines = em.lines
    cmp = ">" if k.kind == "argmax" else "<"
    dt = _tp(k.value.dtype)
    init = 'float("-inf")' if k.kind == "argmax" else 'float("inf")'
    inner = [f"r0 = {'s * C + ' if S > 1 else ''}k * BR", "r = (r0 + tp.arange(BR))[:, None]"] + loop_lines
    inner.append(f"v = {val}")
    # the first valid element of a lane is always taken; after it a strictly better one, or the first NaN
    take = f"(v {cmp} accv) | ((v != v) & (accv == accv)) | (acci < 0)"
    if S * C != k.R:
        take = f"({take}) & (r < R)"
    inner += [f"take = {take}", "accv = tp.where(take, v, accv)", f"acci = tp.where(take, {ind}, acci)"]
    body = ["pid = tp.block_id(0)", "o = pid // NI", "i0 = (pid % NI) * BI"]
    if _uses(pre_lines + inner, "i"):
        body.append("i = (i0 + tp.arange(BI))[None, :]")
    if S > 1:
        body.append("s = tp.block_id(1)")
    body += pre_lines
    body += [f"accv = tp.full((BR, BI), {init}, {dt})", "acci = tp.full((BR, BI), -1, tp.i64)",
             "for k in range(tp.cdiv(C, BR)):"]
    body += ["    " + line for line in inner]
    body += ["isnan = tp.max((accv != accv).to(tp.i32), axis=0, keepdims=True)",
             f"best = tp.{'max' if k.kind == 'argmax' else 'min'}(accv, axis=0, keepdims=True)",
             "hit = tp.where(isnan != 0, accv != accv, accv == best) & (acci >= 0)",
             "res_i = tp.min(tp.where(hit, acci, 2147483647), axis=0)",
             f"res_v = tp.where(tp.max((accv != accv).to(tp.i32), axis=0) != 0, float(\"nan\"), "
             f"tp.{'max' if k.kind == 'argmax' else 'min'}(accv, axis=0))"]
    outs = []
    for buf, text in zip(targets, ("res_v", "res_i")):
        if S > 1:
            line, ov = _partial_store(em, buf, k, S, text)
            body.append(line)
        else:
            name, ov = _out_view(em, buf, (k.O, k.I))
            body.append(f"tp.store({name}[o, i0:i0 + BI], {text})")
        outs.append(ov)
    body = lower_tags.annotate_tile(body, em)
    params, args = _view_signature(em, outs, buffers)
    consts = {"M": k.M, "R": k.R, "C": C, "O": k.O, "I": k.I, "NI": _cdiv(k.I, bi), "BI": bi, "BR": br}
    grid = f"lambda m: (tp.cdiv({k.I}, m['BI']) * {k.O}, {S})"
    return _kernel_src(kname, params, consts, _threads(bi * br), k.what, body), kname, args, grid


def render_welford(k: Reduction, kname: str, buffers: dict) -> tuple[list, list]:
    """Mean and sum of squared deviations in one read: each tile lane folds its elements in (Welford, as
    Chan's pairwise update with weight 1), the lanes are combined with Chan's formula through tile sums; too
    few outputs for the GPU: S partial (count, mean, M2) triples and a combine kernel that folds them the same
    way."""

    bm, br, S, C = _split_plan(k)
    if S == 1:
        return [_welford_kernel(k, kname, buffers, bm, br, 1, C, None, (k.out, k.out2))], []
    shape, idx = _partial_layout(k, S)
    parts = [Buffer(f"{k.out.name}_{n}", shape, torch.float32, "temp") for n in ("cnt", "mean", "m2")]
    buffers = dict(buffers, **{b.name: b for b in parts})
    first = _welford_kernel(dataclasses.replace(k, epilogue=None), kname, buffers, bm, br, S, C, None,
                            tuple(parts))
    loads = tuple(vals.load(b.name, idx, b.dtype) for b in parts)
    second = dataclasses.replace(k, value=loads[1], R=S, extra={"no_split": True})
    b2, r2, _, c2 = _split_plan(second)
    combine = _welford_kernel(second, kname + "_combine", buffers, b2, r2, 1, c2, loads, (k.out, k.out2))
    return [first, combine], parts


def _welford_kernel(k, kname, buffers, bm, br, S, C, partials, targets):
    row = k.mode == "row"
    roots = [k.value] if partials is None else list(partials)
    names = {v.args[0]: v.args[0] for v in walk(roots) if v.op in ("load", "gather")}
    names.update({b.name: b.name for b in targets})
    if k.epilogue is not None:
        names[k.epilogue[0].name] = k.epilogue[0].name
        names.update({v.args[0]: v.args[0] for v in walk([k.epilogue[1]]) if v.op in ("load", "gather")})
    dtypes = {b: buffers[b].dtype for b in buffers}
    numels = {b: max(1, buffers[b].numel) for b in buffers}
    if row:
        axes, scalars, sizes = (("m", "m0", "BM"), ("r", "r0", "BR")), (), {"m": k.M, "r": k.R}
    else:
        axes, scalars, sizes = (("r", "r0", "BR"), ("i", "i0", "BI")), ("o",), {"o": k.O, "i": k.I, "r": k.R}
    em = _TileEmitter(names, "i32", dtypes, sizes, numels, axes, scalars)
    for v in walk(roots):
        if "r" not in v.vars and v.op != "const":
            em.value(v)
    pre_lines, em.lines = em.lines, []
    texts = [em.value(v) for v in roots]
    loop_lines = em.lines
    tile = "(BM, BR)" if row else "(BR, BI)"
    A = 1 if row else 0
    masked = S * C != k.R
    rx = "[None, :]" if row else "[:, None]"
    inner = [f"r0 = {'s * C + ' if S > 1 else ''}k * BR", f"r = (r0 + tp.arange(BR)){rx}"] + loop_lines
    if partials is None:
        v = texts[0] if _is_tile(k.value) else f"tp.full({tile}, {texts[0]}, tp.f32)"
        if masked:
            inner += ["ok = r < R", "c = tp.where(ok, 1.0, 0.0)", f"x = tp.where(ok, {v}, mean)", "q = 0.0"]
        else:
            inner += ["c = 1.0", f"x = {v}", "q = 0.0"]
    else:
        c_t, m_t, q_t = texts
        if masked:
            inner += ["ok = r < R", f"c = tp.where(ok, {c_t}, 0.0)", f"x = tp.where(ok, {m_t}, mean)",
                      f"q = tp.where(ok, {q_t}, 0.0)"]
        else:
            inner += [f"c = {c_t}", f"x = {m_t}", f"q = {q_t}"]
    inner += ["n = cnt + c", "delta = x - mean", "w = c / tp.maximum(n, 1.0)", "mean = mean + delta * w",
              "m2 = m2 + q + delta * delta * cnt * w", "cnt = n"]
    body = []
    if row:
        body.append("m0 = tp.block_id(0) * BM")
        if _uses(pre_lines + inner, "m"):
            body.append("m = (m0 + tp.arange(BM))[:, None]")
    else:
        body += ["pid = tp.block_id(0)", "o = pid // NI", "i0 = (pid % NI) * BI"]
        if _uses(pre_lines + inner, "i"):
            body.append("i = (i0 + tp.arange(BI))[None, :]")
    if S > 1:
        body.append("s = tp.block_id(1)")
    body += pre_lines
    body += [f"cnt = tp.zeros({tile}, tp.f32)", f"mean = tp.zeros({tile}, tp.f32)", f"m2 = tp.zeros({tile}, tp.f32)",
             "for k in range(tp.cdiv(C, BR)):"]
    body += ["    " + line for line in inner]
    body += [f"tot = tp.sum(cnt, axis={A}, keepdims=True)",
             f"mu = tp.sum(cnt * mean, axis={A}, keepdims=True) / tp.maximum(tot, 1.0)",
             "dm = mean - mu",
             f"res_n = tp.sum(cnt, axis={A})",
             f"res_mean = tp.sum(cnt * mean, axis={A}) / tp.maximum(res_n, 1.0)",
             f"res_m2 = tp.sum(m2 + cnt * dm * dm, axis={A})"]
    results = ("res_n", "res_mean", "res_m2") if len(targets) == 3 else ("res_mean", "res_m2")
    outs = []
    if len(targets) == 2 and k.epilogue is not None:
        # var/std's per-output step computed here: the results as (BM, 1) / (1, BI) tiles
        out_buf, value, key, store_result = k.epilogue
        body.append(f"q_k = tp.sum(m2 + cnt * dm * dm, axis={A}, keepdims=True)")
        em.done[vals.load(k.out.name, key, k.out.dtype)] = "mu"
        em.done[vals.load(k.out2.name, key, k.out2.dtype)] = "q_k"
        em.lines = []
        val = em.value(value)
        body += em.lines
        v_text = val if _is_tile(value) else f"tp.full({'(BM, 1)' if row else '(1, BI)'}, {val}, {_tp(value.dtype)})"
        if row:
            name, ov = _out_view(em, out_buf, (k.M, 1))
            body.append(f"tp.store({name}[m0:m0 + BM, 0:1], {v_text})")
        else:
            name, ov = _out_view(em, out_buf, (k.O, 1, k.I))
            body.append(f"tp.store({name}[o, 0:1, i0:i0 + BI], {v_text})")
        outs.append(ov)
        if not store_result:
            targets, results = (), ()
    for buf, text in zip(targets, results):
        if S > 1:
            line, ov = _partial_store(em, buf, k, S, text)
            body.append(line)
        elif row:
            name, ov = _out_view(em, buf, (k.M,))
            body.append(f"tp.store({name}[m0:m0 + BM], {text})")
        else:
            name, ov = _out_view(em, buf, (k.O, k.I))
            body.append(f"tp.store({name}[o, i0:i0 + BI], {text})")
        outs.append(ov)
    body = lower_tags.annotate_tile(body, em)
    params, args = _view_signature(em, outs, buffers)
    consts = {"M": k.M, "R": k.R, "C": C}
    if row:
        consts.update(BM=bm, BR=br)
        grid = f"lambda m: (tp.cdiv({k.M}, m['BM']), {S})"
    else:
        consts.update(O=k.O, I=k.I, NI=_cdiv(k.I, bm), BI=bm, BR=br)
        grid = f"lambda m: (tp.cdiv({k.I}, m['BI']) * {k.O}, {S})"
    return _kernel_src(kname, params, consts, _threads(bm * br), k.what, body), kname, args, grid
