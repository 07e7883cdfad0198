"""The tile IR: a small structured, imperative IR with named variables.

Expressions are `Const`, `Var`, `BinOp`, `UnOp` and `Call(op, args, attrs)`, where `op` names one entry of
the op catalogue (`tilepy.ops.OPS`) and `attrs` holds its compile-time attributes (shapes, dtypes, layouts,
instructions, tag functions). Statements are `Assign`, `Eval` (an op run for its effect), `For` and `If`.
Every node carries the `Span` it came from. Consumers (interpreter, verifier, backends) walk this tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import Span


@dataclass(eq=False)
class Expr:
    type: Any
    span: Span


@dataclass(eq=False)
class Const(Expr):
    value: Any = None


@dataclass(eq=False)
class Var(Expr):
    name: str = ""


@dataclass(eq=False)
class BinOp(Expr):
    op: str = "+"  # + - * / // % ** & | ^ << >> < <= > >= == != and or
    lhs: Expr = None
    rhs: Expr = None


@dataclass(eq=False)
class UnOp(Expr):
    op: str = "-"  # - not ~
    operand: Expr = None


@dataclass(eq=False)
class Call(Expr):
    op: str = ""
    args: tuple = ()
    attrs: dict = field(default_factory=dict)


@dataclass(eq=False)
class Stmt:
    span: Span


@dataclass(eq=False)
class Assign(Stmt):
    name: str = ""
    value: Expr = None


@dataclass(eq=False)
class Eval(Stmt):
    call: Call = None


@dataclass(eq=False)
class For(Stmt):
    """`for var in range(start, stop, step)`; kind "range" (a run-time loop), "pipeline" (software-pipelined
    with `stages` in flight) or "static" (unrolled at compile time)."""

    var: str = ""
    start: Expr = None
    stop: Expr = None
    step: Expr = None
    body: list = field(default_factory=list)
    kind: str = "range"
    stages: int | None = None


@dataclass(eq=False)
class If(Stmt):
    """kind "uniform": every thread takes the same branch. kind "role": the condition depends on the
    warp/thread id; threads split into roles (warp specialization) that run concurrently."""

    cond: Expr = None
    then: list = field(default_factory=list)
    orelse: list = field(default_factory=list)
    kind: str = "uniform"


@dataclass
class Param:
    name: str
    type: Any
    span: Span


@dataclass
class TagFn:
    """A tag function or tag predicate as written (`lambda i, k: ("A", i, k)`): its parameters, its body as a
    small expression tree (tuples, constants, parameter names, arithmetic, comparisons, indexing), and the
    compiled Python function for evaluating it on concrete values."""

    params: tuple[str, ...]
    body: Any  # nested tuples: ("tuple", items) | ("const", v) | ("name", n) | ("bin", op, a, b) | ...
    source: str
    fn: Any
    span: Span


@dataclass
class KernelIR:
    name: str
    params: list[Param]
    constexprs: dict
    body: list
    num_threads: int
    target: str
    file: str
    line: int
    shared_bytes: int = 0
    var_types: dict = field(default_factory=dict)
    cluster: tuple = (1, 1, 1)  # thread-block cluster shape (blocks per cluster along x, y, z)
    min_blocks: int = 0         # blocks per multiprocessor the register budget must allow (0: no such bound)
    unsigned_role_index: bool = False  # a warp role's thread index outside loops as an unsigned remainder (render)

    @property
    def cluster_size(self) -> int:
        return self.cluster[0] * self.cluster[1] * self.cluster[2]

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)


def walk(stmts):
    """Every statement, depth first, nested bodies included."""
    for s in stmts:
        yield s
        if isinstance(s, For):
            yield from walk(s.body)
        elif isinstance(s, If):
            yield from walk(s.then)
            yield from walk(s.orelse)


def walk_exprs(e):
    """`e` and every expression inside it."""
    yield e
    if isinstance(e, BinOp):
        yield from walk_exprs(e.lhs)
        yield from walk_exprs(e.rhs)
    elif isinstance(e, UnOp):
        yield from walk_exprs(e.operand)
    elif isinstance(e, Call):
        for a in e.args:
            if isinstance(a, Expr):
                yield from walk_exprs(a)
