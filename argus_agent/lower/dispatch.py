"""One graph node to its lowering: the registry's function for the node's op, called on the lowered arguments.
Its own module so that lowerings which lower a sub-graph themselves (SDPA's decomposition) and the program
walk share it without importing each other."""

from __future__ import annotations

import functools
import logging

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

from .core import Context
from .graph import LoweringError, source_line
from .registry import lookup

log = logging.getLogger("argus_agent.lower")

# ops being decomposed right now: a decomposition that gives back its own op (none in torch 2.13's table) is
# refused rather than followed forever
_DECOMPOSING: set = set()


@functools.cache
def _torch_decompositions() -> dict:
    """torch's full table of decompositions (core ATen ops included: upsampling, repeat, pixel_unshuffle, ...)."""
    from torch._decomp import decomposition_table
    return dict(decomposition_table)


def decompose_node(ctx: Context, node, env):
    """Lower a core-ATen op without a lowering of its own through torch's decomposition of it: the node is
    traced on fake tensors of its operands' shapes with that one decomposition (plus export's core-ATen table),
    and every op of the result is lowered as usual (each may itself decompose the same way)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    flat, spec = pytree.tree_flatten((node.args, node.kwargs))
    slots = [i for i, a in enumerate(flat) if isinstance(a, fx.Node) and isinstance(a.meta.get("val"), torch.Tensor)]
    with FakeTensorMode():
        fakes = [torch.empty(tuple(flat[i].meta["val"].shape), dtype=flat[i].meta["val"].dtype) for i in slots]

    def call(*tensors):
        given = [env[a] if isinstance(a, fx.Node) else a for a in flat]
        for i, t in zip(slots, tensors):
            given[i] = t
        args, kwargs = pytree.tree_unflatten(given, spec)
        return node.target(*args, **kwargs)

    table = dict(torch.export.default_decompositions())
    table[node.target] = _torch_decompositions()[node.target]
    _DECOMPOSING.add(node.target)
    try:
        with torch.no_grad():
            gm = make_fx(call, decomposition_table=table, tracing_mode="fake")(*fakes)
        sub: dict = {}
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        for ph, i in zip(placeholders, slots):
            sub[ph] = env[flat[i]]
        result = None
        for n in gm.graph.nodes:
            if n.op == "call_function":
                n.meta["stack_trace"] = node.meta.get("stack_trace")
                sub[n] = lower_node(ctx, n, sub)
            elif n.op == "get_attr":
                raise LoweringError(f"{source_line(node)}: torch's decomposition of `{node.target}` reads a "
                                    "constant tensor, which is not lowered")
            elif n.op == "output":
                result = fx.node.map_arg(n.args[0], lambda m: sub[m])
    finally:
        _DECOMPOSING.discard(node.target)
    if isinstance(result, list):
        result = tuple(result)
    return result


def lower_node(ctx: Context, node, env):
    """The LTensor (or tuple) of one graph node: its registered lowering on its lowered arguments, with the
    reference's line in every error. A half-precision result is rounded to its dtype as eager stores it
    (`_round_like_eager`), so a fused chain rounds where eager's op boundaries do."""
    got = _lower_node(ctx, node, env)
    return got if _DECOMPOSING else _round_like_eager(got)


def _round_like_eager(t):
    """Eager rounds every half-precision op's output to its dtype; a fused value stays in fp32 registers, so
    it gets the same rounding (`roundto`) unless it is already what a buffer holds (a stored result, a view
    of one: loads are rounded by their storage). Inside torch's decomposition of one op only the op's own
    result is rounded (eager runs it as one kernel)."""
    from . import values as vals
    from .core import LTensor

    if isinstance(t, (tuple, list)):
        return type(t)(_round_like_eager(x) for x in t)
    if not isinstance(t, LTensor) or t.buffer is not None or t.dtype not in (torch.float16, torch.bfloat16):
        return t
    fn, name = t._fn, vals.TP_DTYPE[t.dtype]

    def rounded(c):
        v = fn(c)
        if v.dtype != torch.float32 or v.op in ("roundto", "load", "gather", "const"):
            return v
        return vals.make("roundto", (v, name), torch.float32)
    return LTensor(t.shape, t.dtype, rounded)


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
        if node.target in _torch_decompositions() and node.target not in _DECOMPOSING:
            log.info("%s: `%s` lowered through torch's own decomposition of it", where, node.target)
            return decompose_node(ctx, node, env)
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
