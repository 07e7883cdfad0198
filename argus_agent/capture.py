"""Capture a reference `Model.forward` with torch.fx and match it against the kernel templates.

The result is a `Pattern`: an optional core op (softmax over the last dim, RMSNorm, 2-D matmul) whose operands
are inputs or parameters, followed by an elementwise epilogue over its result; or a pure elementwise chain over
inputs of one shape. Elementwise expressions are small trees: ("in", k) | ("const", v) | (op, *args).
Anything else raises `UnsupportedOpError` naming the op and where it was met.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field

import torch
import torch.fx as fx
import torch.nn.functional as F


class UnsupportedOpError(Exception):
    """The reference uses an op no template can express yet."""


# torch callables / method names / module types -> elementwise op names of our expression trees
_BINARY = {
    operator.add: "add", torch.add: "add", operator.sub: "sub", torch.sub: "sub", operator.mul: "mul",
    torch.mul: "mul", operator.truediv: "div", torch.div: "div", torch.maximum: "maximum",
    torch.minimum: "minimum", operator.pow: "pow", torch.pow: "pow",
}
_UNARY = {
    torch.relu: "relu", F.relu: "relu", torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid", torch.tanh: "tanh",
    F.tanh: "tanh", torch.exp: "exp", torch.abs: "abs", operator.neg: "neg", torch.neg: "neg", F.silu: "silu",
    F.gelu: "gelu", torch.sqrt: "sqrt", torch.rsqrt: "rsqrt", torch.log: "log", torch.erf: "erf",
    torch.sin: "sin", torch.cos: "cos",
}
_METHODS_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "pow": "pow", "__add__": "add",
                   "__mul__": "mul", "__sub__": "sub", "__truediv__": "div"}
_METHODS_UNARY = {"relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp", "abs": "abs",
                  "neg": "neg", "sqrt": "sqrt", "rsqrt": "rsqrt", "log": "log", "erf": "erf", "sin": "sin",
                  "cos": "cos"}
_MODULES_UNARY = {torch.nn.ReLU: "relu", torch.nn.Sigmoid: "sigmoid", torch.nn.Tanh: "tanh", torch.nn.SiLU: "silu",
                  torch.nn.GELU: "gelu"}
_SOFTMAX = {torch.softmax, F.softmax}
_MATMUL = {torch.matmul, operator.matmul, torch.mm}

SUPPORTED = ("elementwise chains of " + ", ".join(sorted(set(_UNARY.values()) | set(_BINARY.values()))) +
             ", clamp; softmax over the last dim; RMSNorm (nn.RMSNorm, F.rms_norm); 2-D matmul; each core op "
             "followed by an elementwise epilogue")


@dataclass
class Pattern:
    kind: str                      # "elementwise" | "softmax" | "rmsnorm" | "matmul"
    inputs: int                    # forward's tensor arguments
    core_args: list = field(default_factory=list)   # ("in", k) or ("param", "path.to.weight")
    epilogue: object = None        # expression tree over ("in", 0) = the core's result, or None
    expr: object = None            # for kind == "elementwise": the tree over ("in", k)
    eps: float | None = None
    ops: list = field(default_factory=list)  # torch ops the reference uses (what ModelNew may not call)

    def describe(self) -> str:
        core = {"elementwise": "fused elementwise chain", "softmax": "row softmax", "rmsnorm": "RMSNorm",
                "matmul": "tiled GEMM"}[self.kind]
        return core + (" + elementwise epilogue" if self.epilogue is not None else "")


def capture(model: torch.nn.Module, n_inputs: int) -> Pattern:
    """Trace `model` and match it; raise UnsupportedOpError naming the first op that does not fit."""
    try:
        gm = fx.symbolic_trace(model)
    except Exception as e:
        raise UnsupportedOpError(f"torch.fx could not trace Model.forward: {type(e).__name__}: {e}") from e
    env: dict = {}
    placeholders = 0
    core = None
    ops = []
    output = None
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            env[node] = ("in", placeholders)
            placeholders += 1
        elif node.op == "get_attr":
            env[node] = ("param", node.target)
        elif node.op == "output":
            output = _arg(env, node.args[0], node)
        else:
            ops.append(_op_name(node, gm))
            found = _core(node, gm, env)
            if found is not None:
                if core is not None:
                    raise UnsupportedOpError(f"`{_op_name(node, gm)}` after another core op: one softmax, "
                                             "RMSNorm or matmul per problem for now (supported: " + SUPPORTED + ")")
                core = found
                env[node] = ("core",)
                continue
            env[node] = _elementwise(node, gm, env)
    if output is None:
        raise UnsupportedOpError("Model.forward returns nothing")
    if core is None:
        if not _uses_inputs(output):
            raise UnsupportedOpError("the output does not depend on the inputs")
        return Pattern("elementwise", placeholders, expr=output, ops=ops)
    kind, args, eps = core
    if any(a[0] not in ("in", "param") for a in args):
        raise UnsupportedOpError(f"the {kind}'s operands must be inputs or parameters (no prologue yet)")
    epilogue = None if output == ("core",) else _rebase(output)
    return Pattern(kind, placeholders, core_args=list(args), epilogue=epilogue, eps=eps, ops=ops)


def _op_name(node, gm) -> str:
    if node.op == "call_module":
        return type(gm.get_submodule(node.target)).__name__
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    t = node.target
    return f"{getattr(t, '__module__', '') or ''}.{getattr(t, '__name__', str(t))}".lstrip(".")


def _arg(env, a, node):
    if isinstance(a, fx.Node):
        return env[a]
    if isinstance(a, bool) or not isinstance(a, int | float):
        raise UnsupportedOpError(f"argument {a!r} of `{node.name}` is neither a tensor nor a number")
    return ("const", float(a))


def _core(node, gm, env):
    """(kind, operands, eps) when `node` is a core op, else None."""
    if node.op == "call_function" and node.target in _SOFTMAX or node.op == "call_method" and node.target == "softmax":
        dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else None)
        if dim not in (-1,) and not _is_last_dim(node, dim):
            raise UnsupportedOpError(f"softmax over dim={dim}: only the last dim (dim=-1) is supported")
        return ("softmax", [env[node.args[0]]], None)
    if node.op == "call_module" and isinstance(gm.get_submodule(node.target), torch.nn.Softmax):
        if gm.get_submodule(node.target).dim != -1:
            raise UnsupportedOpError("nn.Softmax over a dim other than -1")
        return ("softmax", [env[node.args[0]]], None)
    if node.op == "call_module" and isinstance(gm.get_submodule(node.target), torch.nn.RMSNorm):
        mod = gm.get_submodule(node.target)
        if len(mod.normalized_shape) != 1 or mod.weight is None:
            raise UnsupportedOpError("nn.RMSNorm over several dims or without a weight")
        eps = mod.eps if mod.eps is not None else torch.finfo(torch.float32).eps
        return ("rmsnorm", [env[node.args[0]], ("param", f"{node.target}.weight")], float(eps))
    if node.op == "call_function" and node.target is F.rms_norm:
        weight = node.kwargs.get("weight", node.args[2] if len(node.args) > 2 else None)
        eps = node.kwargs.get("eps", node.args[3] if len(node.args) > 3 else None)
        if weight is None:
            raise UnsupportedOpError("F.rms_norm without a weight")
        return ("rmsnorm", [env[node.args[0]], env[weight]],
                float(eps if eps is not None else torch.finfo(torch.float32).eps))
    if node.op == "call_function" and node.target in _MATMUL or node.op == "call_method" and node.target in (
            "matmul", "mm", "__matmul__"):
        return ("matmul", [env[node.args[0]], env[node.args[1]]], None)
    return None


def _is_last_dim(node, dim) -> bool:
    meta = node.args[0].meta.get("tensor_meta") if isinstance(node.args[0], fx.Node) else None
    return meta is not None and dim == len(meta.shape) - 1


def _elementwise(node, gm, env):
    name = _op_name(node, gm)
    if node.op == "call_module":
        mod = gm.get_submodule(node.target)
        op = _MODULES_UNARY.get(type(mod))
        if op is None:
            raise UnsupportedOpError(f"module `{name}` ({node.target}) is not supported (supported: {SUPPORTED})")
        if op == "gelu" and getattr(mod, "approximate", "none") != "none":
            raise UnsupportedOpError("nn.GELU(approximate='tanh') is not supported; use the exact GELU")
        return (op, _arg(env, node.args[0], node))
    if node.op == "call_function" and node.target in (torch.clamp, torch.clip) or (
            node.op == "call_method" and node.target in ("clamp", "clip")):
        x = _arg(env, node.args[0], node)
        lo = node.kwargs.get("min", node.args[1] if len(node.args) > 1 else None)
        hi = node.kwargs.get("max", node.args[2] if len(node.args) > 2 else None)
        if lo is not None:
            x = ("maximum", x, _arg(env, lo, node))
        if hi is not None:
            x = ("minimum", x, _arg(env, hi, node))
        return x
    table_b = _BINARY if node.op == "call_function" else _METHODS_BINARY if node.op == "call_method" else {}
    table_u = _UNARY if node.op == "call_function" else _METHODS_UNARY if node.op == "call_method" else {}
    if node.target in table_b and len(node.args) >= 2:
        if node.kwargs.get("alpha", 1) != 1 or node.kwargs.get("rounding_mode") is not None:
            raise UnsupportedOpError(f"`{name}` with alpha/rounding_mode is not supported")
        a, b = _arg(env, node.args[0], node), _arg(env, node.args[1], node)
        op = table_b[node.target]
        if op == "pow":
            if b != ("const", 2.0):
                raise UnsupportedOpError(f"`{name}` with an exponent other than 2 is not supported")
            return ("mul", a, a)
        return (op, a, b)
    if node.target in table_u:
        if table_u[node.target] == "gelu" and node.kwargs.get("approximate", "none") != "none":
            raise UnsupportedOpError("gelu(approximate='tanh') is not supported; use the exact GELU")
        return (table_u[node.target], _arg(env, node.args[0], node))
    raise UnsupportedOpError(f"op `{name}` (fx node `{node.name}`) is not supported; supported: {SUPPORTED}")


def _uses_inputs(e) -> bool:
    return e[0] == "in" or (e[0] not in ("const", "param", "core") and any(_uses_inputs(a) for a in e[1:]))


def _rebase(e):
    """The epilogue tree with the core's result as ("in", 0); other tensors are not supported yet."""
    if e == ("core",):
        return ("in", 0)
    if e[0] == "const":
        return e
    if e[0] in ("in", "param"):
        raise UnsupportedOpError("the epilogue after the core op may use only its result and numbers, not other "
                                 "tensors (bias tensors are not supported yet)")
    return (e[0], *(_rebase(a) for a in e[1:]))


# ----------------------------------------------------------------------------- rendering to tilepy text
_RENDER = {
    "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "div": "({0} / {1})",
    "maximum": "tp.maximum({0}, {1})", "minimum": "tp.minimum({0}, {1})", "relu": "tp.maximum({0}, 0.0)",
    "neg": "(-{0})", "gelu": "({0} * 0.5 * (1.0 + tp.erf({0} * " + repr(1 / math.sqrt(2)) + ")))",
    **{u: f"tp.{u}({{0}})" for u in ("sigmoid", "tanh", "exp", "abs", "silu", "sqrt", "rsqrt", "log", "erf",
                                       "sin", "cos")},
}


def render_expr(e, names) -> str:
    """tilepy source for an expression tree; `names[k]` is the variable holding input k."""
    text = _render(e, names)
    return text[1:-1] if text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]) else text


def _render(e, names) -> str:
    if e[0] == "in":
        return names[e[1]]
    if e[0] == "const":
        return repr(e[1])
    return _RENDER[e[0]].format(*(_render(a, names) for a in e[1:]))


def _balanced(s: str) -> bool:
    depth = 0
    for c in s:
        depth += (c == "(") - (c == ")")
        if depth < 0:
            return False
    return depth == 0


def eval_expr(e, values):
    """Evaluate a tree with torch (used by tests to cross-check rendering)."""
    if e[0] == "in":
        return values[e[1]]
    if e[0] == "const":
        return e[1]
    a = [eval_expr(x, values) for x in e[1:]]
    fns = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
           "maximum": lambda x, y: torch.maximum(torch.as_tensor(x), torch.as_tensor(y)),
           "minimum": lambda x, y: torch.minimum(torch.as_tensor(x), torch.as_tensor(y)), "relu": torch.relu,
           "neg": operator.neg, "gelu": F.gelu, "silu": F.silu}
    fn = fns.get(e[0]) or getattr(torch, e[0])
    return fn(*a)
