"""Hypothesis strategies for random small PyTorch programs of core-ATen ops, to test a lowering against eager.

`programs()` draws `(model, inputs)`: an `nn.Module` whose forward is a straight-line program over its inputs and
parameters, and CPU-size inputs for it. The program mixes pointwise chains with broadcasting (against other values,
fresh inputs and broadcast-shaped parameters such as a (C, 1, 1) bias), reductions over random dims with and without
keepdim, softmax and cumsum over a random dim, matmuls (against a weight, a vector, or the value's own transpose) and
views (permute, reshape, slice with a step, expand, unsqueeze). Every value holds at most `max_elements` elements;
extents are small and often odd. Hypothesis shrinks a failing program to a short one, and the model's repr is its
program, one op a line. Use:

    @settings(max_examples=50, deadline=None)
    @given(programs())
    def test_lowering_matches_eager(drawn):
        model, inputs = drawn
        torch.testing.assert_close(lower(model)(*inputs), model(*inputs))
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import strategies as st

MAX_EXTENT = 9
# Constants drawn for scalar operands: few and exact, so that shrunk programs read well.
SCALARS = (0.5, -1.25, 2.0, -0.75, 3.0)


@dataclass(frozen=True)
class Step:
    """`out = OPS[op](*values named by args, *attrs)`."""

    out: str
    op: str
    args: tuple[str, ...]
    attrs: tuple = ()

    def __str__(self) -> str:
        attrs = "".join(f", {a!r}" for a in self.attrs)
        return f"{self.out} = {self.op}({', '.join(self.args)}{attrs})"


def _slice(x, dim, start, stop, step):
    index = [slice(None)] * x.dim()
    index[dim] = slice(start, stop, step)
    return x[tuple(index)]


OPS = {
    # pointwise, unary
    "relu": torch.relu, "gelu": F.gelu, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "silu": F.silu,
    "neg": torch.neg, "abs": torch.abs, "sin": torch.sin,
    "affine": lambda x, a, b: x * a + b,
    "clamp": lambda x, lo, hi: torch.clamp(x, lo, hi),
    # pointwise, binary (broadcasting)
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "maximum": torch.maximum,
    "where_gt": lambda x, y: torch.where(x > y, x, y),
    # reductions
    "sum": lambda x, dims, keepdim: torch.sum(x, dim=dims, keepdim=keepdim),
    "mean": lambda x, dims, keepdim: torch.mean(x, dim=dims, keepdim=keepdim),
    "amax": lambda x, dims, keepdim: torch.amax(x, dim=dims, keepdim=keepdim),
    "amin": lambda x, dims, keepdim: torch.amin(x, dim=dims, keepdim=keepdim),
    "softmax": lambda x, dim: torch.softmax(x, dim=dim),
    "log_softmax": lambda x, dim: torch.log_softmax(x, dim=dim),
    "cumsum": lambda x, dim: torch.cumsum(x, dim=dim),
    # matmul
    "matmul": torch.matmul,
    "gram": lambda x: x @ x.transpose(-1, -2),
    # views
    "permute": lambda x, perm: x.permute(*perm),
    "reshape": lambda x, shape: x.reshape(shape),
    "slice": _slice,
    "expand": lambda x, shape: x.expand(*shape),
    "unsqueeze": torch.unsqueeze,
}
KINDS = ("unary", "binary", "reduce", "softmax", "matmul", "view")


class RandomProgram(nn.Module):
    """A straight-line program over named inputs (x0, x1, ...) and parameters (p0, p1, ...); returns the last value."""

    def __init__(self, inputs: dict[str, tuple], params: dict[str, tuple], steps: list[Step], seed: int = 0,
                 shapes: dict[str, tuple] | None = None):
        super().__init__()
        self.shapes = dict(shapes or {})  # every value's shape, as the generator tracked it
        generator = torch.Generator().manual_seed(seed)
        for name, shape in params.items():
            self.register_parameter(name, nn.Parameter(torch.randn(shape, generator=generator)))
        self.input_shapes = dict(inputs)
        self.steps = list(steps)

    @property
    def ops(self) -> set[str]:
        return {s.op for s in self.steps}

    def forward(self, *inputs):
        env = dict(zip(self.input_shapes, inputs))
        env.update(self.named_parameters())
        for step in self.steps:
            env[step.out] = OPS[step.op](*(env[a] for a in step.args), *step.attrs)
        return env[self.steps[-1].out]

    def __repr__(self) -> str:
        lines = [f"{n}: input {list(s)}" for n, s in self.input_shapes.items()]
        lines += [f"{n}: parameter {list(p.shape)}" for n, p in self.named_parameters()]
        lines += [str(s) for s in self.steps]
        return "RandomProgram(\n  " + "\n  ".join(lines) + "\n)"


def _numel(shape) -> int:
    return math.prod(shape)


class _Builder:
    """Draws one program, tracking each value's shape."""

    def __init__(self, draw, max_elements: int):
        self.draw, self.max_elements = draw, max_elements
        self.shapes: dict[str, tuple] = {}
        self.inputs: dict[str, tuple] = {}
        self.params: dict[str, tuple] = {}
        self.steps: list[Step] = []

    def new_input(self, shape) -> str:
        name = f"x{len(self.inputs)}"
        self.inputs[name] = self.shapes[name] = tuple(shape)
        return name

    def new_param(self, shape) -> str:
        name = f"p{len(self.params)}"
        self.params[name] = self.shapes[name] = tuple(shape)
        return name

    def emit(self, op, args, attrs, shape) -> str:
        out = f"v{len(self.steps)}"
        self.steps.append(Step(out, op, tuple(args), tuple(attrs)))
        self.shapes[out] = tuple(shape)
        return out

    def shape(self, max_rank=4) -> tuple:
        rank = self.draw(st.integers(1, max_rank))
        dims = []
        for _ in range(rank):
            left = self.max_elements // max(1, _numel(dims))
            dims.append(self.draw(st.integers(1, max(1, min(MAX_EXTENT, left)))))
        return tuple(dims)

    def broadcast_of(self, shape) -> tuple:
        """A shape that broadcasts against `shape`: some dims set to 1, some leading dims dropped."""
        drop = self.draw(st.integers(0, len(shape)))
        return tuple(1 if self.draw(st.booleans()) else d for d in shape[drop:])

    def current(self) -> str:
        """The operand of the next step: the newest value, so that every step feeds the output (binary steps
        bring in earlier values, fresh inputs and parameters as their second operand)."""
        return f"v{len(self.steps) - 1}" if self.steps else "x0"

    # one method per kind of step; each returns False where the drawn operand does not suit it
    def unary(self, x) -> bool:
        op = self.draw(st.sampled_from(("relu", "gelu", "tanh", "sigmoid", "silu", "neg", "abs", "sin", "affine",
                                        "clamp")))
        attrs = ()
        if op == "affine":
            attrs = (self.draw(st.sampled_from(SCALARS)), self.draw(st.sampled_from(SCALARS)))
        elif op == "clamp":
            attrs = (-0.5, self.draw(st.sampled_from((0.5, 1.0, 2.0))))
        self.emit(op, [x], attrs, self.shapes[x])
        return True

    def binary(self, x) -> bool:
        op = self.draw(st.sampled_from(("add", "sub", "mul", "maximum", "where_gt")))
        source = self.draw(st.sampled_from(("param", "input", "value")))
        if source == "value":
            others = [n for n, s in self.shapes.items() if n != x and _broadcastable(self.shapes[x], s)
                      and _numel(torch.broadcast_shapes(self.shapes[x], s)) <= self.max_elements]
            if not others:
                return False
            y = self.draw(st.sampled_from(sorted(others)))
        elif source == "param":
            y = self.new_param(self.broadcast_of(self.shapes[x]))
        else:
            y = self.new_input(self.broadcast_of(self.shapes[x]))
        if self.draw(st.booleans()):
            x, y = y, x
        self.emit(op, [x, y], (), torch.broadcast_shapes(self.shapes[x], self.shapes[y]))
        return True

    def reduce(self, x) -> bool:
        shape = self.shapes[x]
        if not shape:
            return False
        # Mostly one dim, sometimes two, sometimes all: full reductions end a chain's interesting shapes.
        count = min(len(shape), self.draw(st.sampled_from((1, 1, 1, 2, len(shape)))))
        dims = self.draw(st.lists(st.integers(0, len(shape) - 1), min_size=count, max_size=count, unique=True))
        dims = tuple(sorted(dims))
        keepdim = self.draw(st.booleans())
        op = self.draw(st.sampled_from(("sum", "mean", "amax", "amin")))
        out = tuple(1 if i in dims else d for i, d in enumerate(shape)) if keepdim else \
            tuple(d for i, d in enumerate(shape) if i not in dims)
        self.emit(op, [x], (dims, keepdim), out)
        return True

    def softmax(self, x) -> bool:
        shape = self.shapes[x]
        if not shape:
            return False
        op = self.draw(st.sampled_from(("softmax", "log_softmax", "cumsum")))
        dim = self.draw(st.integers(-len(shape), len(shape) - 1))
        self.emit(op, [x], (dim,), shape)
        return True

    def matmul(self, x) -> bool:
        shape = self.shapes[x]
        if not shape:
            return False
        form = self.draw(st.sampled_from(("weight", "vector", "gram")))
        if form == "gram":
            if len(shape) < 2 or _numel(shape[:-1]) * shape[-2] > self.max_elements:
                return False
            self.emit("gram", [x], (), shape[:-1] + (shape[-2],))
            return True
        if form == "vector":
            w = self.new_param((shape[-1],))
            self.emit("matmul", [x, w], (), shape[:-1])
            return True
        n = self.draw(st.integers(1, MAX_EXTENT))
        if _numel(shape[:-1]) * n > self.max_elements:
            return False
        w = self.new_param((shape[-1], n))
        self.emit("matmul", [x, w], (), shape[:-1] + (n,))
        return True

    def view(self, x) -> bool:
        shape = self.shapes[x]
        form = self.draw(st.sampled_from(("permute", "reshape", "slice", "expand", "unsqueeze")))
        if form == "unsqueeze" and len(shape) < 4:
            dim = self.draw(st.integers(0, len(shape)))
            self.emit("unsqueeze", [x], (dim,), shape[:dim] + (1,) + shape[dim:])
        elif form == "permute" and len(shape) >= 2:
            perm = tuple(self.draw(st.permutations(range(len(shape)))))
            self.emit("permute", [x], (perm,), tuple(shape[i] for i in perm))
        elif form == "reshape" and len(shape) >= 2:
            i = self.draw(st.integers(0, len(shape) - 2))
            out = shape[:i] + (shape[i] * shape[i + 1],) + shape[i + 2:]
            self.emit("reshape", [x], (out,), out)
        elif form == "slice" and any(d >= 2 for d in shape):
            dim = self.draw(st.sampled_from([i for i, d in enumerate(shape) if d >= 2]))
            start = self.draw(st.integers(0, shape[dim] - 1))
            stop = self.draw(st.integers(start + 1, shape[dim]))
            step = self.draw(st.integers(1, 3))
            out = shape[:dim] + (len(range(start, stop, step)),) + shape[dim + 1:]
            self.emit("slice", [x], (dim, start, stop, step), out)
        elif form == "expand" and 1 in shape:
            out = tuple(self.draw(st.integers(1, 5)) if d == 1 else d for d in shape)
            if _numel(out) > self.max_elements:
                return False
            self.emit("expand", [x], (out,), out)
        else:
            return False
        return True


def _broadcastable(a, b) -> bool:
    try:
        torch.broadcast_shapes(a, b)
    except RuntimeError:
        return False
    return True


@st.composite
def programs(draw, max_steps: int = 6, max_elements: int = 4096, kinds: tuple[str, ...] = KINDS):
    """Draws `(model, inputs)`: a `RandomProgram` of 1..max_steps ops of the given kinds and fp32 inputs for it."""
    builder = _Builder(draw, max_elements)
    builder.new_input(builder.shape())
    target = draw(st.integers(1, max_steps))
    for _ in range(4 * target):
        if len(builder.steps) == target:
            break
        kind = draw(st.sampled_from(kinds))
        getattr(builder, kind)(builder.current())
    if not builder.steps:
        builder.unary(builder.current())
    seed = draw(st.integers(0, 2**16))
    model = RandomProgram(builder.inputs, builder.params, builder.steps, seed=seed, shapes=builder.shapes).eval()
    generator = torch.Generator().manual_seed(seed + 1)
    inputs = [torch.randn(shape, generator=generator) for shape in builder.inputs.values()]
    return model, inputs
