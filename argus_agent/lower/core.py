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
from .index import Var, const, flatten, numel, unflatten
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
    """out[m] = combine over r in [0, R) of value(m, r), for m in [0, M): `value` reads "m" and "r".

    kind: sum | max | min | prod | argmax-style helpers are built from these by the lowerings.
    """

    out: Buffer
    kind: str
    value: V
    M: int
    R: int
    what: str = ""
    extra: dict = field(default_factory=dict)


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

    def contiguous(self, t: LTensor, base: str = "buf") -> LTensor:
        """`t` as a buffer holding exactly its elements in row-major order (a copy kernel only if needed)."""
        if t.buffer is not None and t.numel == t.buffer.numel and t.shape:
            i = Var("i", t.numel)
            v = t(unflatten(i, t.shape))
            if v.op == "load" and v.args[0] == t.buffer.name and v.args[1] == i and not v.args[2]:
                return t
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
        if self.target != "cpu" and M < 256 and R >= 1 << 16 and kind in ("sum", "max", "min") \
                and dtype.is_floating_point:
            return self._split_reduce(kind, out_shape, red_shape, fn, dtype, base, M, R)
        buf = self.add_buffer(base, out_shape, dtype)
        m, r = Var("m", M), Var("r", R)
        value = fn(unflatten(m, out_shape), unflatten(r, red_shape))
        self.kernels.append(Reduction(buf, kind, value, M, R, self.note, extra))
        return buffer_tensor(buf)


def _neutral(kind, dtype):
    return vals.const({"sum": 0.0, "max": float("-inf"), "min": float("inf")}[kind], dtype)


def _split_reduce(self, kind, out_shape, red_shape, fn, dtype, base, M, R):
    """Few outputs over a long range: partial results over S chunks of the range (enough blocks to fill
    the GPU), then a second reduction over the chunks."""
    S = max(2, min(1024, R // 4096, 2048 // M))
    C = -(-R // S)

    def fn1(oc, rc):
        s_idx, j = rc[0], rc[1]
        flat = s_idx * C + j
        v = fn(oc, unflatten(flat, red_shape))
        ok = vals.call("lt", vals.index_value(flat), vals.const(R, torch.int64))
        return vals.call("where", ok, v, _neutral(kind, v.dtype))
    partial = self.reduce(kind, tuple(out_shape) + (S,), (C,), lambda oc, rc: fn1(oc[:-1], [oc[-1], rc[0]]),
                          dtype, base + "_part")
    return self.reduce(kind, out_shape, (S,), lambda oc, rc: partial(list(oc) + [rc[0]]), dtype, base)


Context._split_reduce = _split_reduce


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

