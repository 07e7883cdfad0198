"""The lowering's model: lowered tensors (index -> value functions), realized buffers and kernel specs.

A `LTensor` is a shape, a dtype and a function from coordinates to a `V`. Pointwise ops, views and broadcasts
compose these functions (nothing is computed); reductions and matmul-like ops are `Reduction` kernels whose
results are realized into buffers; whatever a graph output needs is realized by a `Pointwise` kernel. The
scheduler is therefore implicit: every pointwise chain is fused into the kernel that consumes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from . import values as vals
from .index import Sum, Var, add, as_index, const, flatten, numel, scale, unflatten
from .values import V


class LTensor:
    """A lowered tensor: `fn(coords) -> V` over `shape`, of torch dtype `dtype`."""

    __slots__ = ("shape", "dtype", "_fn", "_memo", "buffer")

    def __init__(self, shape, dtype: torch.dtype, fn, buffer=None):
        self.shape = tuple(int(n) for n in shape)
        self.dtype = dtype
        self._fn = fn
        self._memo: dict = {}
        self.buffer = buffer   # the Buffer this tensor reads contiguously, if it is one

    def __call__(self, coords) -> V:
        key = tuple(coords)
        got = self._memo.get(key)
        if got is None:
            if len(key) != len(self.shape):
                raise AssertionError(f"{len(key)} coordinates for a rank-{len(self.shape)} tensor")
            got = self._fn(list(key))
            self._memo[key] = got
        return got

    @property
    def numel(self) -> int:
        return numel(self.shape)


@dataclass
class Buffer:
    """A tensor in global memory, passed to kernels flat (1-D)."""

    name: str
    shape: tuple
    dtype: torch.dtype
    kind: str               # "input" | "param" | "buffer" | "temp"
    source: object = None   # input index, or the module's fully qualified name

    @property
    def numel(self) -> int:
        return numel(self.shape)


@dataclass
class Pointwise:
    """out[i] = value(i) for i in [0, out.numel): `value` reads the loop variable "i"."""

    out: Buffer
    value: V
    what: str = ""


@dataclass
class Reduction:
    """out[m] = combine over r in [0, R) of value(m, r), for m in [0, M).

    kind: sum | max | min | prod (argmax-style helpers are built from these by the lowerings).
    mode: how the value's loads tile (`Context.reduce` decides it):
      "row"      value reads "m" and "r"; its r-dependent loads are windows whose fast axis is r
      "col"      m = o * I + i; value reads "o" (one per block), "i" and "r"; its loads' fast axis is i
                 (the outputs), the reduced index strided: a reduction over a leading or middle dim
      "generic"  value reads "m" and "r", loads are gathers
    """

    out: Buffer
    kind: str
    value: V
    M: int
    R: int
    what: str = ""
    extra: dict = field(default_factory=dict)
    mode: str = "generic"
    O: int = 1
    I: int = 1
    # (out Buffer, value, index of the result in value, also store `out`?): a per-output pointwise epilogue
    # computed at the store (row/col modes); value reads the result as a load of `out` at that index
    epilogue: tuple | None = None
    out2: Buffer | None = None   # argmax/argmin kinds: the extreme values (`out` holds the first indices)


@dataclass
class Scan:
    """out[o, j, i] = combine over j' <= j (reverse: j' >= j; exclusive: strictly) of value, along the middle
    axis of an (O, N, I) geometry: I == 1 reads "m" (= o) and "r" (= j), else "o", "i" and "r"."""

    out: Buffer
    kind: str          # sum | prod
    value: V
    O: int
    N: int
    I: int
    reverse: bool = False
    exclusive: bool = False
    what: str = ""


@dataclass
class RowFused:
    """One kernel for a chain on the same rows: reductions `stages` (row mode, equal M and R; a stage reads
    an earlier one's result at index "m"), then `value` stored to `out`: per element of the (M, R) rows
    (`per_row` False, value reads "m" and "r") or per row (value reads "m"). Rows are held whole in registers.
    `keep` names the stage buffers other kernels read (their results are stored as well)."""

    stages: list
    out: Buffer
    value: V
    M: int
    R: int
    per_row: bool
    keep: set = field(default_factory=set)
    what: str = ""

def buffer_tensor(buf: Buffer) -> LTensor:
    shape = buf.shape
    return LTensor(shape, buf.dtype, lambda c: vals.load(buf.name, flatten(c, shape), buf.dtype), buffer=buf)


class Context:
    """Buffers and kernels produced while lowering one graph."""

    def __init__(self, target: str = "cpu"):
        self.target = target
        self.buffers: list[Buffer] = []
        self.kernels: list = []
        self._names: set = set()
        self.note = ""   # the op being lowered, for kernel descriptions

    def name(self, base: str) -> str:
        base = "".join(ch if ch.isalnum() else "_" for ch in base).strip("_") or "t"
        name, k = base, 1
        while name in self._names:
            k += 1
            name = f"{base}{k}"
        self._names.add(name)
        return name

    def add_buffer(self, base: str, shape, dtype, kind="temp", source=None) -> Buffer:
        buf = Buffer(self.name("b_" + base), tuple(int(n) for n in shape), dtype, kind, source)
        self.buffers.append(buf)
        return buf

    def realize(self, t: LTensor, base: str = "buf") -> LTensor:
        """Compute `t` into a buffer of its own (a Pointwise kernel); a tensor that is one already is kept."""
        if t.buffer is not None and t.buffer.shape == t.shape:
            return t
        dtype = t.dtype if t.dtype in vals.STORAGE_OK else torch.int32
        buf = self.add_buffer(base, t.shape, dtype)
        i = Var("i", max(1, t.numel))
        value = t(unflatten(i, t.shape)) if t.shape else t([])
        self.kernels.append(Pointwise(buf, value, self.note))
        return buffer_tensor(buf)

    def whole_buffer(self, t: LTensor):
        """The buffer `t` reads element for element in row-major order (its own, or one a view of it composes
        back to: an unsqueeze, a reshape, a flip of a reversed scan), or None."""
        i = Var("i", t.numel) if t.shape else const(0)
        v = t(unflatten(i, t.shape)) if t.shape else t([])
        if v.op != "load" or v.args[1] != i or v.args[2]:
            return None
        cands = ([t.buffer] if t.buffer is not None else []) + self.buffers
        buf = next((b for b in cands if b.name == v.args[0]), None)
        return buf if buf is not None and buf.numel == t.numel and buf.dtype == t.dtype else None

    def contiguous(self, t: LTensor, base: str = "buf") -> LTensor:
        """`t` as a buffer holding exactly its elements in row-major order (a copy kernel only if needed)."""
        buf = self.whole_buffer(t) if t.shape else None
        if buf is not None:
            return t if buf is t.buffer else LTensor(t.shape, t.dtype, t._fn, buffer=buf)
        plain = LTensor(t.shape, t.dtype, t._fn)
        return self.realize(plain, base)

    def reduce(self, kind: str, out_shape, red_shape, fn, dtype: torch.dtype, base: str = "red",
               **extra) -> LTensor:
        """A Reduction kernel: out[o] = combine_r fn(out_coords, red_coords); its result as a buffer tensor."""
        out_shape = tuple(int(n) for n in out_shape)
        red_shape = tuple(int(n) for n in red_shape)
        M, R = max(1, numel(out_shape)), numel(red_shape)
        if R == 0:
            raise NotImplementedError("reduction over an empty range")
        buf = self.add_buffer(base, out_shape, dtype)
        r = Var("r", R)
        rc = unflatten(r, red_shape)
        m = Var("m", M)
        value = fn(unflatten(m, out_shape), rc)
        if tiles(value, {"m": M, "r": R}, ("m", "r"), (), hoisted="r"):
            self.kernels.append(Reduction(buf, kind, value, M, R, self.note, extra, mode="row"))
            return buffer_tensor(buf)
        for p in range(len(out_shape)):
            O, I = numel(out_shape[:p]), numel(out_shape[p:])
            if I == 1:
                break
            o, i = Var("o", O), Var("i", I)
            cval = fn(unflatten(o, out_shape[:p]) + unflatten(i, out_shape[p:]), rc)
            if tiles(cval, {"o": O, "i": I, "r": R}, ("r", "i"), ("o",), hoisted="r"):
                self.kernels.append(Reduction(buf, kind, cval, M, R, self.note, extra, mode="col", O=O, I=I))
                return buffer_tensor(buf)
        if self.target != "cpu" and M < 8192 and R >= 1 << 14 and kind in ("sum", "max", "min") \
                and dtype.is_floating_point:
            self._names.discard(buf.name)
            self.buffers.remove(buf)
            return self._split_reduce(kind, out_shape, red_shape, fn, dtype, base, M, R)
        self.kernels.append(Reduction(buf, kind, value, M, R, self.note, extra))
        return buffer_tensor(buf)

    def _split_reduce(self, kind, out_shape, red_shape, fn, dtype, base, M, R) -> LTensor:
        """A gathering reduction with few outputs over a long range, in two passes: partials over S
        consecutive chunks of C = R / S reduced elements (S divides R: no chunk runs past the range), then a
        row reduction over the S partials of each output. One pass when R has no divisor giving chunks of
        at least 256 elements and enough work items."""
        S = next((s for s in range(max(2, -(-8192 // M)), R // 256 + 1) if R % s == 0), None)
        if S is None:
            S = next((s for s in range(R // 256, 1, -1) if R % s == 0), None)
        if S is None:
            buf = self.add_buffer(base, out_shape, dtype)
            value = fn(unflatten(Var("m", M), out_shape), unflatten(Var("r", R), red_shape))
            self.kernels.append(Reduction(buf, kind, value, M, R, self.note, {}))
            return buffer_tensor(buf)
        C = R // S
        part = self.reduce(kind, tuple(out_shape) + (S,), (C,),
                           lambda oc, rc: fn(list(oc[:-1]), unflatten(add(scale(as_index(oc[-1]), C), rc[0]),
                                                                     red_shape)),
                           dtype, base=base + "_part", no_split=True)
        return self.reduce(kind, out_shape, (S,), lambda oc, rc: part(list(oc) + [rc[0]]), dtype, base=base)

    def reduce_arg(self, kind: str, out_shape, n: int, fn, vdtype: torch.dtype):
        """(extreme values, first indices) along one reduced axis of length n in ONE column-mode kernel
        (kind "max" | "min"), or None when the loads do not tile as columns (then the caller reduces twice)."""
        out_shape = tuple(int(x) for x in out_shape)
        M, r = max(1, numel(out_shape)), Var("r", n)
        for p in range(len(out_shape)):
            O, I = numel(out_shape[:p]), numel(out_shape[p:])
            if I == 1:
                break
            cval = fn(unflatten(Var("o", O), out_shape[:p]) + unflatten(Var("i", I), out_shape[p:]), [r])
            if cval.dtype.is_floating_point and tiles(cval, {"o": O, "i": I, "r": n}, ("r", "i"), ("o",)):
                ibuf = self.add_buffer("argidx", out_shape, torch.int64)
                vbuf = self.add_buffer("a" + kind, out_shape, vdtype)
                self.kernels.append(Reduction(ibuf, "arg" + kind, cval, M, n, self.note, {}, mode="col", O=O, I=I,
                                              out2=vbuf))
                return buffer_tensor(vbuf), buffer_tensor(ibuf)
        return None

    def reduce_welford(self, out_shape, red_shape, fn, dtype: torch.dtype):
        """(mean, sum of squared deviations) over `red_shape` in ONE read (Welford per tile lane, Chan's
        combination across lanes and split partials), for reductions the row fusion does not hold in registers:
        column reductions and rows longer than ROW_MAX. None otherwise (the caller takes two passes, which a
        fused row kernel does in registers, or gathers)."""
        from .sizes import ROW_MAX, next_pow2

        out_shape, red_shape = tuple(int(n) for n in out_shape), tuple(int(n) for n in red_shape)
        M, R = max(1, numel(out_shape)), numel(red_shape)
        if R < 2:
            return None
        r = Var("r", R)
        rc = unflatten(r, red_shape)
        value = fn(unflatten(Var("m", M), out_shape), rc)
        if tiles(value, {"m": M, "r": R}, ("m", "r"), ()):
            if next_pow2(R) <= ROW_MAX:
                return None
            spec = dict(mode="row")
        else:
            spec = None
            for p in range(len(out_shape)):
                O, I = numel(out_shape[:p]), numel(out_shape[p:])
                if I == 1:
                    break
                cval = fn(unflatten(Var("o", O), out_shape[:p]) + unflatten(Var("i", I), out_shape[p:]), rc)
                if tiles(cval, {"o": O, "i": I, "r": R}, ("r", "i"), ("o",)):
                    value, spec = cval, dict(mode="col", O=O, I=I)
                    break
            if spec is None:
                return None
        mbuf = self.add_buffer("wmean", out_shape, dtype)
        qbuf = self.add_buffer("wm2", out_shape, dtype)
        self.kernels.append(Reduction(mbuf, "welford", value, M, R, self.note, {}, out2=qbuf, **spec))
        return buffer_tensor(mbuf), buffer_tensor(qbuf)

    def scan(self, kind: str, shape, dim: int, fn, dtype: torch.dtype, reverse=False, base: str = "scan"):
        """out = scan along `dim` of fn(coords) (a Scan kernel); a value read backwards along `dim` (a flip)
        scans in reverse over the unflipped positions, and the result is returned flipped (a view)."""
        shape = tuple(int(n) for n in shape)
        O, N, I = numel(shape[:dim]), shape[dim], numel(shape[dim + 1:])
        buf = self.add_buffer(base, shape, dtype)

        def coords(flip, at=None):
            r = Var("r", N)
            j = add(const(N - 1), scale(r, -1)) if flip else r if at is None else at
            if I == 1:
                return unflatten(Var("m", O), shape[:dim]) + [j]
            return unflatten(Var("o", O), shape[:dim]) + [j] + unflatten(Var("i", I), shape[dim + 1:])
        sizes = {"m": O, "o": O, "r": N, "i": I}
        axes, scalars = (("m", "r"), ()) if I == 1 else (("r", "i"), ("o",))
        value = fn(coords(False))
        flipped = exclusive = False
        if not tiles(value, sizes, axes, scalars):
            alt = fn(coords(True))
            if tiles(alt, sizes, axes, scalars):
                value, flipped, reverse = alt, True, not reverse
            elif N > 1 and not reverse:
                # a scan of [identity, x[..., :-1]] (a concatenation) is the exclusive scan of x
                first = fn(coords(False, at=const(0)))
                shifted = fn(coords(False, at=add(Var("r", N), const(1))))
                neutral = 0 if kind == "sum" else 1
                if vals.is_const(first) and first.args[0] == neutral and tiles(shifted, sizes, axes, scalars):
                    value, exclusive = shifted, True
        self.kernels.append(Scan(buf, kind, value, O, N, I, reverse=reverse, exclusive=exclusive,
                                 what=self.note))
        t = buffer_tensor(buf)
        if not flipped:
            return t

        def read(c):
            c = list(c)
            c[dim] = add(const(N - 1), scale(as_index(c[dim]), -1))
            return t(c)
        return LTensor(shape, dtype, read)


def tiles(value: V, sizes: dict, axes: tuple, scalars: tuple, hoisted: str | None = None) -> bool:
    """Whether every load of `value` that moves along the tile's axes is a window load (see `window`).
    `hoisted`: the reduced axis of a tiled reduction, whose renderer computes what does not depend on it
    once, before its loop: a load that does not move along it (a per-channel bias) may be a gather there."""
    found = False
    for v in vals.walk([value]):
        if hoisted is not None and hoisted not in v.vars:
            continue
        if v.op == "gather" and v.vars & set(axes):
            return False
        if v.op != "load" or not (v.vars & set(axes)):
            continue
        if v.args[2] or window(v.args[1], sizes, axes, scalars, None) is None:
            return False
        found = True
    return found


def window(idx, sizes: dict, axes: tuple, scalars: tuple, numel_: int | None):
    """A load index as a window of a view of the flat buffer, or None.

    The index must be `c + sum(coef * var)` over the tile's axis variables (`axes`, in tile order) and
    block-uniform scalars (`scalars`); the tile variables' strides must nest (each divides the next larger
    one, the smallest is 1) and decrease in tile order. The view has one dim per tile variable (sizes: the
    buffer's numel over the largest stride, then the ratios of consecutive strides); the scalars and the
    constant shift the window's start. A variable other than the first may not run past its dim (that would
    wrap into the next row). Returns (view shape, [(var, offset) per dim], {scalar: coef in dim 0}).
    `numel_` None: the leading size is not checked (None in the shape)."""
    if isinstance(idx, Var):
        terms, c = [(1, idx)], 0
    elif isinstance(idx, Sum):
        terms, c = list(idx.terms), idx.c
    else:
        return None
    coef_t, coef_s = {}, {}
    for k, a in terms:
        if not isinstance(a, Var):
            return None
        if a.name in axes:
            coef_t[a.name] = k
        elif a.name in scalars:
            coef_s[a.name] = k
        else:
            return None
    if not coef_t or c < 0 or any(k <= 0 for k in coef_t.values()):
        return None
    order = sorted(coef_t, key=lambda n: -coef_t[n])
    if [n for n in axes if n in coef_t] != order:
        return None        # the tile's axes are not in memory order (a transpose): left to gathers
    strides = [coef_t[n] for n in order]
    if strides[-1] != 1 or len(set(strides)) != len(strides) or any(a % b for a, b in zip(strides, strides[1:])):
        return None
    lead = strides[0]
    if any(k % lead for k in coef_s.values()):
        return None
    shape, dims = [], []
    for k, n in enumerate(order):
        st = strides[k]
        if k == 0:
            off = c // st
            size = None if numel_ is None else numel_ // st
        else:
            off = (c % strides[k - 1]) // st
            size = strides[k - 1] // st
            if off + sizes[n] > size:
                return None
        shape.append(size)
        dims.append((n, off))
    if numel_ is not None and numel_ % lead:
        return None
    return shape, dims, {n: k // lead for n, k in coef_s.items()}


def broadcast_shapes(*shapes) -> tuple:
    return tuple(torch.broadcast_shapes(*[torch.Size(s) for s in shapes]))


def broadcast_coords(coords, from_shape, to_shape):
    """Coordinates into a tensor of `from_shape` broadcast to `to_shape` (trailing alignment)."""
    lead = len(to_shape) - len(from_shape)
    out = []
    for d, n in enumerate(from_shape):
        out.append(const(0) if int(n) == 1 else coords[lead + d])
    return out


def expand_to(t, shape, dtype=None) -> LTensor:
    """A scalar or tensor broadcast to `shape` (scalars become constants of `dtype`)."""
    if isinstance(t, LTensor):
        if t.shape == tuple(shape):
            return t
        return LTensor(shape, t.dtype, lambda c: t(broadcast_coords(c, t.shape, shape)))
    dt = dtype or (torch.float32 if isinstance(t, float) else torch.bool if isinstance(t, bool) else torch.int64)
    v = vals.const(t, dt)
    return LTensor(shape, dt, lambda c: v)

