"""Type rules of shared-tile views: `tp.permute(s, dims)`, `tp.transpose(s)` and `s.T` on a shared tile (or
one stage of it) give the same memory with its axes permuted, as a `shared_permute` op whose type is
`SharedType.permute(dims)`. Register tiles go on to the register-tile rules (builtins_reduce)."""

from __future__ import annotations

from . import ir
from .builtins_util import _show
from .errors import KernelTypeError, ShapeError
from .types import SharedType


class SharedViewRules:
    """Mixin of BuiltinRules (first in its bases, so `b_permute` sees shared tiles before the register rules)."""

    def shared_permute(self, node, x, dims):
        t = x.type
        if not isinstance(dims, tuple) or sorted(dims) != list(range(len(t.shape))):
            raise self.err(node, f"tp.permute needs a permutation of the {len(t.shape)} axes, got {_show(dims)}",
                           "tp.permute(s, (1, 0))", ShapeError)
        if t.stages is not None:
            raise self.err(node, "permute one stage of a multi-stage shared tile",
                           "tp.transpose(a_s[k % STAGES])", KernelTypeError)
        if tuple(dims) == tuple(range(len(t.shape))):
            return x
        return self.make("shared_permute", t.permute(tuple(dims)), node, x, dims=tuple(dims))

    def b_permute(self, node, x, dims):
        if isinstance(x, ir.Expr) and isinstance(x.type, SharedType):
            return self.shared_permute(node, x, dims)
        return super().b_permute(node, x, dims)

    def b_transpose(self, node, x):
        """`tp.transpose(x)`: the axes reversed (a 2-D tile transposed), for shared and register tiles."""
        rank = len(getattr(getattr(x, "type", None), "shape", ()) or ())
        if rank < 2:
            raise self.err(node, f"tp.transpose takes a tile of rank >= 2, got {_show(x)}", cls=KernelTypeError)
        return self.b_permute(node, x, tuple(reversed(range(rank))))
