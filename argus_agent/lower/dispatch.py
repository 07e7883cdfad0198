"""One graph node to its lowering: the registry's function for the node's op, called on the lowered arguments.
Its own module so that lowerings which lower a sub-graph themselves (SDPA's decomposition) and the program
walk share it without importing each other."""

from __future__ import annotations

import torch.fx as fx

from .core import Context
from .graph import LoweringError, source_line
from .registry import lookup


def lower_node(ctx: Context, node, env):
    """The LTensor (or tuple) of one graph node: its registered lowering on its lowered arguments, with the
    reference's line in every error."""
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
