"""Front end: a kernel's Python source, parsed with libcst, translated into the tile IR.

One `Translator` per specialization (constexpr values + target). Each Python construct has one method:
statements `stmt_<Node>`, expressions `expr_<Node>`; builtins are handled in `tilepy.builtins_impl`. A value
during translation is either a compile-time Python object (ints, floats, dtypes, layouts, instructions,
tuples of those) or an `ir.Expr` for run-time values; arithmetic on compile-time values folds in Python.
Anything outside the language raises a `CompileError` subclass naming file:line with a hint.
"""

from __future__ import annotations

import builtins as _py
from typing import Any

import libcst as cst
import numpy as np
from libcst.metadata import MetadataWrapper, PositionProvider

from . import dtypes as dt
from . import ir
from .builtins_impl import BoundMethod, BuiltinRules
from .errors import (
    CompileError,
    ConstexprError,
    KernelTypeError,
    Span,
    UnsupportedConstructError,
)
from .language import Builtin, TensorSpec
from .operators import BINOPS, CMPOPS, PY_BINOPS
from .ops import ATOMICS
from .targets import Target
from .thread_values import static_thread_values
from .types import NONE, RegType, ScalarType, TensorType

# Python statements with a pointer to what to write instead.
UNSUPPORTED_STMT_HINTS = {
    "While": "use `for i in range(n)` with a bound known when the kernel runs",
    "Try": "kernels cannot catch exceptions; check conditions with `if` and masks",
    "With": "kernels have no context managers; use tp.barrier()/tp.pipeline explicitly",
    "FunctionDef": "define helpers outside the kernel (compile-time Python) or inline the code",
    "ClassDef": "define classes outside the kernel",
    "Return": "kernels return nothing: write results with tp.store(...)",
    "Raise": "kernels cannot raise; use tp.assert_tag for invariants the verifier proves",
    "Import": "import at module level, outside the kernel",
    "ImportFrom": "import at module level, outside the kernel",
    "Global": "kernels cannot write Python globals; pass values as parameters",
    "Nonlocal": "kernels cannot write enclosing variables; pass values as parameters",
    "Del": "variables live until the kernel ends; just stop using it",
    "Assert": "state invariants with tp.assert_tag(...) (checked at compile time by tilepy-verify)",
    "AnnAssign": "drop the annotation: types are inferred",
    "Match": "use if/else on scalars",
}


class KernelSource:
    """A kernel function's parsed source, shared by all its specializations."""

    def __init__(self, fn, source: str, file: str, first_line: int):
        self.fn = fn
        self.file = file
        self.first_line = first_line
        self.lines = source.splitlines()
        wrapper = MetadataWrapper(cst.parse_module(source))
        self.module = wrapper.module
        self.positions = wrapper.resolve(PositionProvider)
        defs = [n for n in self.module.body if isinstance(n, cst.FunctionDef)]
        if not defs:
            raise CompileError("no function definition found in the kernel source", Span(file, first_line, 0))
        self.func: cst.FunctionDef = defs[0]

    def span(self, node: cst.CSTNode) -> Span:
        pos = self.positions.get(node)
        if pos is None:
            return Span(self.file, self.first_line, 0)
        line = pos.start.line
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return Span(self.file, self.first_line + line - 1, pos.start.column, text)


class Translator:
    def __init__(self, src: KernelSource, params: list, constexprs: dict, target: Target, num_threads: int,
                 cluster: tuple = (1, 1, 1)):
        self.src = src
        self.cluster = cluster
        self.cluster_size = cluster[0] * cluster[1] * cluster[2]
        self.params = params  # [(name, TensorSpec | DType | "constexpr", default)]
        self.constexprs = constexprs
        self.target = target
        self.num_threads = num_threads
        self.globals = src.fn.__globals__
        self.scope: dict[str, Any] = {}
        self.var_types: dict[str, Any] = {}
        self.block: list = []
        self.shared_bytes = 0
        self.thread_values: dict[str, Any] = {}
        self.role_ids = np.arange(num_threads)
        self.mutable = _assigned_in_control_flow(src.func)
        self.rules = BuiltinRules(self)

    # ----------------------------------------------------------------- helpers
    def span(self, node) -> Span:
        return self.src.span(node)

    def error(self, node, message: str, hint: str = "", cls=CompileError):
        return cls(message, self.span(node), hint)

    def emit(self, stmt):
        self.block.append(stmt)

    def as_expr(self, value, node) -> ir.Expr:
        """A compile-time value as an IR constant (ints -> i32, floats -> f32, bools -> bool)."""
        if isinstance(value, ir.Expr):
            return value
        span = self.span(node)
        if isinstance(value, bool):
            return ir.Const(ScalarType(dt.bool_), span, value)
        if isinstance(value, int):
            return ir.Const(ScalarType(dt.i32 if -(2**31) <= value < 2**31 else dt.i64), span, value)
        if isinstance(value, float):
            return ir.Const(ScalarType(dt.f32), span, value)
        raise self.error(node, f"{value!r} cannot be used as a run-time value", cls=KernelTypeError,
                         hint="only ints, floats and bools become run-time constants")

    # ----------------------------------------------------------------- entry
    def translate(self) -> ir.KernelIR:
        func = self.src.func
        ir_params = []
        for name, spec, _default in self.params:
            span = self.src.span(func)
            if spec == "constexpr":
                self.scope[name] = self.constexprs[name]
            elif isinstance(spec, TensorSpec):
                t = TensorType(spec.dtype, spec.shape)
                ir_params.append(ir.Param(name, t, span))
                self.scope[name] = ir.Var(t, span, name)
            else:
                t = ScalarType(spec)
                ir_params.append(ir.Param(name, t, span))
                self.scope[name] = ir.Var(t, span, name)
            if spec != "constexpr":
                self.var_types[name] = self.scope[name].type
        self.top_block = self.block
        self.stmts(_body_statements(func))
        return ir.KernelIR(
            name=func.name.value, params=ir_params, constexprs=dict(self.constexprs), body=self.block,
            num_threads=self.num_threads, target=self.target.name, file=self.src.file,
            line=self.src.first_line, shared_bytes=self.shared_bytes, var_types=self.var_types,
            cluster=self.cluster,
        )

    # ----------------------------------------------------------------- statements
    def stmts(self, nodes):
        for node in nodes:
            if isinstance(node, cst.SimpleStatementLine):
                for small in node.body:
                    self.stmt(small)
            else:
                self.stmt(node)

    def stmt(self, node):
        kind = type(node).__name__
        method = getattr(self, f"stmt_{kind}", None)
        if method is None:
            hint = UNSUPPORTED_STMT_HINTS.get(kind, "rewrite it with assignments, for-range loops, if, and tp.* calls")
            raise self.error(node, f"`{_describe(node)}` is not supported inside a kernel", hint,
                             UnsupportedConstructError)
        method(node)

    def stmt_Pass(self, node):
        pass

    def stmt_Expr(self, node: cst.Expr):
        if isinstance(node.value, cst.SimpleString | cst.ConcatenatedString):
            return  # docstring
        if not isinstance(node.value, cst.Call):
            raise self.error(node, "an expression statement without effect", "assign it or remove it",
                             UnsupportedConstructError)
        value = self.expr(node.value)
        if isinstance(value, ir.Call) and (value.type is NONE or value.op in ATOMICS):
            self.emit(ir.Eval(self.span(node), value))  # an atomic's old values may go unused

    def stmt_Assign(self, node: cst.Assign):
        if len(node.targets) != 1:
            raise self.error(node, "chained assignment (a = b = ...)", "assign one name at a time",
                             UnsupportedConstructError)
        value = self.expr(node.value)
        self.bind(node.targets[0].target, value, node)

    def stmt_AugAssign(self, node: cst.AugAssign):
        if not isinstance(node.target, cst.Name):
            raise self.error(node, "augmented assignment to something other than a name",
                             "write `x = x + y` to a variable", UnsupportedConstructError)
        op = _aug_op(node.operator)
        lhs = self.expr(node.target)
        rhs = self.expr(node.value)
        self.bind(node.target, self.binop(op, lhs, rhs, node), node)

    def bind(self, target, value, node):
        if isinstance(target, cst.Tuple):
            values = value if isinstance(value, tuple) else None
            if values is None or len(values) != len(target.elements):
                raise self.error(node, "tuple unpacking needs a tuple of the same length on the right",
                                 cls=UnsupportedConstructError)
            # Python evaluates the whole right side before it binds any name: `a, b = b, a + b` reads the old `a`.
            # A value that reads a name bound by an earlier element is first held in a temporary of its own.
            held, assigned = [], set()
            for el, v in zip(target.elements, values):
                if isinstance(v, ir.Expr) and assigned and any(
                        isinstance(x, ir.Var) and x.name in assigned for x in ir.walk_exprs(v)):
                    self._held = getattr(self, "_held", 0) + 1
                    tmp = f"_held{self._held}"
                    self.bind(cst.Name(tmp), v, node)
                    v = self.scope[tmp]
                held.append(v)
                assigned |= _target_names(el.value)
            for el, v in zip(target.elements, held):
                self.bind(el.value, v, node)
            return
        if not isinstance(target, cst.Name):
            raise self.error(node, "assignment to an attribute or subscript",
                             "write into tiles and tensors with tp.store(...) or tp.copy(...)",
                             UnsupportedConstructError)
        name = target.value
        if isinstance(self.scope.get(name), ir.Param) or name in self.constexprs:
            raise self.error(node, f"`{name}` is a kernel parameter and cannot be reassigned",
                             "use a new variable name", ConstexprError)
        if not isinstance(value, ir.Expr):
            if name not in self.mutable:
                self.scope[name] = value  # compile-time binding, folded where used
                return
            value = self.as_expr(value, node)
        if value.type is NONE:
            raise self.error(node, "this call returns nothing", "call it as a statement", KernelTypeError)
        old = self.var_types.get(name)
        if old is not None and old != value.type:
            value = self.rules.coerce_to(value, old, node, name)
        self.var_types[name] = value.type
        if isinstance(value.type, ScalarType) and not value.type.uniform:
            static = self.static_thread_values(value)
            if static is not None:
                self.thread_values[name] = static
            else:
                self.thread_values.pop(name, None)
        self.emit(ir.Assign(self.span(node), name, value))
        self.scope[name] = ir.Var(value.type, self.span(target), name)

    def stmt_For(self, node: cst.For):
        if node.orelse is not None:
            raise self.error(node, "for-else", "move the else part after the loop", UnsupportedConstructError)
        if not isinstance(node.target, cst.Name):
            raise self.error(node.target, "loop targets must be a single name", cls=UnsupportedConstructError)
        var = node.target.value
        kind, start, stop, step, stages = self.rules.loop_header(node.iter)
        if kind == "static":
            for i in _py.range(start, stop, step):
                self.scope[var] = i
                self.stmts(_body_statements(node))
            return
        i32 = ScalarType(dt.i32)
        start, stop, step = (self.as_expr(v, node.iter) for v in (start, stop, step))
        for v, what in ((start, "start"), (stop, "stop"), (step, "step")):
            if not (isinstance(v.type, ScalarType) and v.type.dtype.is_int):
                raise self.error(node.iter, f"loop {what} must be an integer scalar, got {v.type}",
                                 cls=KernelTypeError)
        self.scope[var] = ir.Var(i32, self.span(node.target), var)
        self.var_types[var] = i32
        body = self.nested(lambda: self.stmts(_body_statements(node)))
        self.emit(ir.For(self.span(node), var, start, stop, step, body, kind, stages))

    def stmt_If(self, node: cst.If):
        cond = self.expr(node.test)
        orelse_nodes = _else_statements(node)
        if not isinstance(cond, ir.Expr):
            if cond:
                self.stmts(_body_statements(node))
            elif orelse_nodes is not None:
                self.stmts(orelse_nodes)
            return
        if not isinstance(cond.type, ScalarType):
            raise self.error(node.test, f"`if` needs a scalar condition, got {cond.type}",
                             "select elementwise with tp.where(cond, a, b)", KernelTypeError)
        kind = "uniform" if cond.type.uniform else "role"
        mask = self.static_thread_values(cond) if kind == "role" else None
        then = self.in_role(mask, lambda: self.stmts(_body_statements(node)))
        orelse = (self.in_role(None if mask is None else ~mask, lambda: self.stmts(orelse_nodes))
                  if orelse_nodes is not None else [])
        self.emit(ir.If(self.span(node), cond, then, orelse, kind))

    def in_role(self, mask, fn) -> list:
        """Translate a warp-role branch. When the condition is a static function of the thread id, tiles
        inside are laid out over the role's threads only (renumbered from 0), as the hardware runs them."""
        saved = self.num_threads, self.role_ids
        if mask is not None:
            mask = np.broadcast_to(np.asarray(mask, dtype=bool), self.role_ids.shape)
            if mask.any():
                self.role_ids = self.role_ids[mask]
                self.num_threads = len(self.role_ids)
        try:
            return self.nested(fn)
        finally:
            self.num_threads, self.role_ids = saved

    def static_thread_values(self, e):
        """The per-thread values of `e` when it depends only on thread/warp ids and constants, else None."""
        return static_thread_values(e, self.role_ids, self.target.warp_size, self.thread_values)

    def nested(self, fn) -> list:
        saved = self.block
        self.block = []
        try:
            fn()
            return self.block
        finally:
            self.block = saved

    # ----------------------------------------------------------------- expressions
    def expr(self, node) -> Any:
        method = getattr(self, f"expr_{type(node).__name__}", None)
        if method is None:
            raise self.error(node, f"`{_describe(node)}` is not supported in kernel expressions",
                             _expr_hint(node), UnsupportedConstructError)
        return method(node)

    def expr_Integer(self, node):
        return int(node.evaluated_value)

    def expr_Float(self, node):
        return float(node.evaluated_value)

    def expr_SimpleString(self, node):
        return node.evaluated_value

    def expr_Name(self, node: cst.Name):
        name = node.value
        if name in self.scope:
            return self.scope[name]
        if name in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[name]
        if name in self.globals:
            return self.globals[name]
        if hasattr(_py, name):
            return getattr(_py, name)
        raise self.error(node, f"name `{name}` is not defined", "define it before use, or pass it as a parameter",
                         KernelTypeError)

    def expr_Attribute(self, node: cst.Attribute):
        base = self.expr(node.value)
        attr = node.attr.value
        if isinstance(base, ir.Expr):
            return self.rules.attribute(base, attr, node)
        try:
            return getattr(base, attr)
        except AttributeError:
            raise self.error(node, f"{_describe(node.value)} has no attribute `{attr}`",
                             cls=KernelTypeError) from None

    def expr_Tuple(self, node: cst.Tuple):
        return tuple(self.expr(el.value) for el in node.elements)

    def expr_List(self, node: cst.List):
        return tuple(self.expr(el.value) for el in node.elements)

    def expr_BinaryOperation(self, node: cst.BinaryOperation):
        return self.binop(BINOPS[type(node.operator)], self.expr(node.left), self.expr(node.right), node)

    def expr_Comparison(self, node: cst.Comparison):
        """`a < b`, and chains as Python means them: `a < b <= c` is `(a < b) and (b <= c)` with `b` taken once
        (elementwise `&` where a side is a tile; kernel expressions have no side effects, so every link is
        evaluated)."""
        left, result = self.expr(node.left), None
        for target in node.comparisons:
            op = CMPOPS.get(type(target.operator))
            if op is None:
                raise self.error(node, f"comparison `{_describe(target.operator).strip()}`",
                                 "use ==, !=, <, <=, >, >=", UnsupportedConstructError)
            right = self.expr(target.comparator)
            link = self.binop(op, left, right, node)
            if result is None:
                result = link
            elif not isinstance(result, ir.Expr) and not isinstance(link, ir.Expr):
                result = result and link
            else:
                tiles = any(isinstance(v, ir.Expr) and isinstance(v.type, RegType) for v in (result, link))
                result = self.binop("&" if tiles else "and", result, link, node)
            left = right
        return result

    def expr_IfExp(self, node: cst.IfExp):
        """`a if c else b`: a compile-time `c` picks one branch while compiling (only that one is translated);
        a run-time `c` (uniform or per-thread scalar, or a boolean tile) selects elementwise, as
        tp.where(c, a, b) (both sides are evaluated: kernel expressions have no side effects)."""
        test = self.expr(node.test)
        if not isinstance(test, ir.Expr):
            return self.expr(node.body if test else node.orelse)
        body, orelse = self.expr(node.body), self.expr(node.orelse)
        for v in (body, orelse):
            if isinstance(v, ir.Expr) and not isinstance(v.type, RegType | ScalarType):
                raise self.error(node, f"a run-time condition selects between values, not {v.type}",
                                 "load the tiles first (tp.load), or choose with a compile-time condition",
                                 KernelTypeError)
        return self.rules.b_where(node, test, body, orelse)

    def expr_BooleanOperation(self, node: cst.BooleanOperation):
        op = "and" if isinstance(node.operator, cst.And) else "or"
        lhs, rhs = self.expr(node.left), self.expr(node.right)
        for v in (lhs, rhs):
            if isinstance(v, ir.Expr) and not isinstance(v.type, ScalarType):
                raise self.error(node, f"`{op}` works on scalars only", "combine tile masks with & and |",
                                 KernelTypeError)
        return self.binop(op, lhs, rhs, node)

    def expr_UnaryOperation(self, node: cst.UnaryOperation):
        operand = self.expr(node.expression)
        op = {cst.Minus: "-", cst.Not: "not", cst.BitInvert: "~", cst.Plus: "+"}[type(node.operator)]
        if not isinstance(operand, ir.Expr):
            return {"-": lambda v: -v, "not": lambda v: not v, "~": lambda v: ~v, "+": lambda v: v}[op](operand)
        if op == "+":
            return operand
        t = operand.type
        if op == "not":
            t = ScalarType(dt.bool_, t.uniform) if isinstance(t, ScalarType) else t
        return ir.UnOp(t, self.span(node), op, operand)

    def expr_Subscript(self, node: cst.Subscript):
        base = self.expr(node.value)
        if not isinstance(base, ir.Expr):
            if isinstance(base, tuple):
                index = [self.expr(e.slice.value) for e in node.slice if isinstance(e.slice, cst.Index)]
                if len(index) != 1 or isinstance(index[0], ir.Expr):
                    raise self.error(node, "compile-time tuples are indexed by one constant",
                                     cls=ConstexprError)
                return base[index[0]]
            raise self.error(node, f"cannot index {_describe(node.value)}", cls=KernelTypeError)
        return self.rules.subscript(base, node)

    def expr_Call(self, node: cst.Call):
        fn = self.expr(node.func)
        if isinstance(fn, BoundMethod):
            return self.rules.method_call(fn, node)
        if isinstance(fn, Builtin):
            return self.rules.call(fn.name, node)
        if fn is _py.abs and len(node.args) == 1 and node.args[0].keyword is None:
            x = self.expr(node.args[0].value)
            return self.rules.b_abs(node, x) if isinstance(x, ir.Expr) else _py.abs(x)   # abs(tile) is tp.abs
        if fn in (_py.min, _py.max):
            args = [self.expr(a.value) for a in node.args]
            if all(not isinstance(a, ir.Expr) for a in args):
                return fn(*args)
            return self.rules.scalar_minmax(fn.__name__, args, node)
        if fn is _py.range:
            raise self.error(node, "range(...) outside a for loop", "loop with `for i in range(...)`",
                             UnsupportedConstructError)
        if fn is _py.print:
            raise self.error(node, "print() inside a kernel", "run on the interpreter and inspect outputs, or "
                             "use tp.assert_tag for invariants", UnsupportedConstructError)
        if callable(fn) and not isinstance(fn, ir.Expr):
            # Compile-time helper (layouts, swizzles, user functions on constants): evaluate it now.
            args = [self.expr(a.value) for a in node.args if a.keyword is None]
            kwargs = {a.keyword.value: self.expr(a.value) for a in node.args if a.keyword is not None}
            if any(isinstance(v, ir.Expr) for v in [*args, *kwargs.values()]):
                raise self.error(node, f"`{_describe(node.func)}` is plain Python and got run-time values",
                                 "only tp.* builtins take run-time values; pass constexprs to helpers",
                                 ConstexprError)
            try:
                return fn(*args, **kwargs)
            except CompileError:
                raise
            except Exception as exc:  # the helper's own error, located at the call
                raise self.error(node, f"{_describe(node.func)}(...) failed while compiling: {exc}",
                                 cls=ConstexprError) from exc
        raise self.error(node, f"`{_describe(node.func)}` is not callable", cls=KernelTypeError)

    def expr_Lambda(self, node):
        raise self.error(node, "lambda outside tp.tag / tp.assert_tag",
                         "lambdas are tag functions; compute values with tp.* ops", UnsupportedConstructError)

    # ----------------------------------------------------------------- arithmetic
    def binop(self, op: str, lhs, rhs, node):
        if not isinstance(lhs, ir.Expr) and not isinstance(rhs, ir.Expr):
            try:
                return PY_BINOPS[op](lhs, rhs)
            except Exception as exc:
                raise self.error(node, f"compile-time `{op}` failed: {exc}", cls=ConstexprError) from exc
        return self.rules.binop(op, lhs, rhs, node)


# --------------------------------------------------------------------- source helpers
def _body_statements(node) -> list:
    body = node.body
    if isinstance(body, cst.IndentedBlock):
        return list(body.body)
    if isinstance(body, cst.SimpleStatementSuite):
        return [cst.SimpleStatementLine(body=body.body)]
    return list(body)


def _else_statements(node: cst.If):
    orelse = node.orelse
    if orelse is None:
        return None
    if isinstance(orelse, cst.If):  # elif
        return [orelse]
    return _body_statements(orelse)


def _aug_op(op) -> str:
    names = {
        cst.AddAssign: "+", cst.SubtractAssign: "-", cst.MultiplyAssign: "*", cst.DivideAssign: "/",
        cst.FloorDivideAssign: "//", cst.ModuloAssign: "%", cst.PowerAssign: "**", cst.BitAndAssign: "&",
        cst.BitOrAssign: "|", cst.BitXorAssign: "^", cst.LeftShiftAssign: "<<", cst.RightShiftAssign: ">>",
    }
    return names[type(op)]


def _assigned_in_control_flow(func: cst.FunctionDef) -> set[str]:
    """Names that may hold different values over the kernel's run: assigned inside loops/ifs or more than
    once. These always become run-time variables; the rest fold when their value is a constant."""
    counts: dict[str, int] = {}
    inside: set[str] = set()

    class Visitor(cst.CSTVisitor):
        depth = 0

        def visit_For(self, node):
            self.depth += 1

        def leave_For(self, node):
            self.depth -= 1

        def visit_If(self, node):
            self.depth += 1

        def leave_If(self, node):
            self.depth -= 1

        def _names(self, target):
            if isinstance(target, cst.Name):
                yield target.value
            elif isinstance(target, cst.Tuple | cst.List):
                for el in target.elements:
                    yield from self._names(el.value)

        def _record(self, target):
            for n in self._names(target):
                counts[n] = counts.get(n, 0) + 1
                if self.depth:
                    inside.add(n)

        def visit_Assign(self, node):
            for t in node.targets:
                self._record(t.target)

        def visit_AugAssign(self, node):
            self._record(node.target)
            self._record(node.target)

    func.body.visit(Visitor())
    return inside | {n for n, c in counts.items() if c > 1}


def _describe(node) -> str:
    try:
        return cst.Module(body=[]).code_for_node(node).strip().splitlines()[0]
    except Exception:
        return type(node).__name__


def _expr_hint(node) -> str:
    return {
        "ListComp": "build tiles with tp.arange/tp.zeros and elementwise ops",
        "GeneratorExp": "build tiles with tp.arange/tp.zeros and elementwise ops",
        "DictComp": "kernels have no dicts",
        "Dict": "kernels have no dicts",
        "Await": "kernels are not coroutines",
        "Yield": "kernels are not generators",
        "FormattedString": "kernels have no strings",
        "NamedExpr": "assign on its own line",
        "StarredElement": "pass arguments explicitly",
    }.get(type(node).__name__, "use tp.* builtins, arithmetic, comparisons and indexing")


def _target_names(target) -> set:
    """The names an assignment target binds (a name, or a tuple / list of targets)."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, cst.Tuple | cst.List):
        return set().union(*(_target_names(el.value) for el in target.elements))
    return set()
