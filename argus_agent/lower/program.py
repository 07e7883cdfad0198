"""Lower a captured core-ATen graph to kernels: walk the nodes, apply each op's lowering, realize outputs."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.fx as fx

from . import ops_nn, ops_pointwise, ops_reduce, ops_views  # noqa: F401  (registrations)
from .core import Buffer, Context, LTensor, buffer_tensor
from .graph import Captured, LoweringError, capture_program, source_line
from .registry import lookup
from .values import STORAGE_OK


@dataclass
class LoweredProgram:
    """Kernels (Pointwise/Reduction specs) in launch order, the buffers they use, and the outputs."""

    captured: Captured
    buffers: list
    kernels: list
    outputs: list            # Buffer per graph output (realized, contiguous), with its shape
    output_shapes: list
    single_output: bool
    ops: list = field(default_factory=list)   # ATen ops of the reference (what ModelNew may not call)
    target: str = "cpu"
    placeholders: dict = field(default_factory=dict)   # graph input name -> Buffer


def lower_model(model: torch.nn.Module, inputs: list, target: str = "cpu") -> LoweredProgram:
    """torch.export `model(*inputs)`, decompose to core ATen, and lower every node (LoweringError otherwise).
    `target` picks template kernels (tensor-core GEMMs) where it has them."""
    captured = capture_program(model, inputs)
    return lower_captured(captured, target)


def lower_captured(captured: Captured, target: str = "cpu") -> LoweredProgram:
    ep = captured.program
    ctx = Context(target)
    env: dict = {}
    by_name = {gi.name: gi for gi in captured.inputs}
    ops = []
    placeholders: dict = {}
    out_node = None
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            gi = by_name[node.name]
            val = node.meta.get("val")
            if not isinstance(val, torch.Tensor):
                env[node] = gi.value
                continue
            if val.dtype not in STORAGE_OK:
                raise LoweringError(f"input `{node.name}` has dtype {val.dtype}, which tilepy kernels do not take "
                                    "yet (supported: float32/16, bfloat16, float64, int8/32/64, bool)")
            kind = gi.kind
            buf = ctx.add_buffer(node.name, tuple(val.shape), val.dtype, kind,
                                 gi.index if kind == "input" else gi.target)
            env[node] = buffer_tensor(buf)
            placeholders[node.name] = buf
        elif node.op == "call_function":
            ops.append(str(node.target))
            env[node] = _lower_node(ctx, node, env)
        elif node.op == "output":
            out_node = node
        elif node.op == "get_attr":
            raise LoweringError(f"{source_line(node)}: a tensor attribute read by get_attr is not lowered yet")
    results = out_node.args[0]
    single = ep.call_spec.out_spec.is_leaf()
    results = [results] if not isinstance(results, (tuple, list)) else list(results)
    outputs, shapes = [], []
    for r in results:
        t = env[r] if isinstance(r, fx.Node) else None
        if not isinstance(t, LTensor):
            raise LoweringError("Model.forward returns a value that is not a tensor")
        ctx.note = f"output {r.name}"
        if t.buffer is not None and t.buffer.kind == "temp" and t.buffer.shape == t.shape and _is_plain(t):
            buf = t.buffer
        else:
            buf = _force_realize(ctx, t, "out")
        outputs.append(buf)
        shapes.append(t.shape)
    return LoweredProgram(captured, ctx.buffers, ctx.kernels, outputs, shapes, single, ops, ctx.target, placeholders)


def _is_plain(t: LTensor) -> bool:
    from .index import Var, unflatten
    if not t.shape:
        return False
    i = Var("i", t.numel)
    v = t(unflatten(i, t.shape))
    return v.op == "load" and v.args[0] == t.buffer.name and v.args[1] == i and not v.args[2]


def _force_realize(ctx: Context, t: LTensor, base: str) -> Buffer:
    plain = LTensor(t.shape, t.dtype, t._fn)   # drop the buffer marker: always a kernel of its own
    return ctx.realize(plain, base).buffer


def _lower_node(ctx: Context, node, env):
    import operator
    if node.target is operator.getitem:
        src, k = node.args
        got = env[src]
        if not isinstance(got, (tuple, list)):
            raise LoweringError(f"{source_line(node)}: indexing the result of `{src.target}`, which is not a tuple")
        return got[k]
    fn = lookup(node.target)
    where = source_line(node)
    if fn is None:
        raise LoweringError(f"{where}: `{node.target}` has no tilepy lowering yet (op of the reference's "
                            f"core-ATen graph); the supported families are listed in docs/lowering.md")
    args = fx.node.map_arg(node.args, lambda n: env[n])
    kwargs = fx.node.map_arg(node.kwargs, lambda n: env[n])
    kwargs = {k: v for k, v in kwargs.items() if k not in ("device", "layout", "pin_memory", "memory_format",
                                                            "non_blocking")}
    if "dtype" in kwargs and not str(node.target).startswith(("aten.sum", "aten.mean", "aten.prod", "aten.cum")):
        kwargs.pop("dtype")
    ctx.note = f"{node.target} ({where})"
    try:
        return fn(ctx, node, *args, **kwargs)
    except LoweringError:
        raise
    except NotImplementedError as e:
        raise LoweringError(f"{where}: `{node.target}`: {e} is not lowered yet") from e
    except Exception as e:
        raise LoweringError(f"{where}: lowering `{node.target}` failed: {type(e).__name__}: {e}") from e
