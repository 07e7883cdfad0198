"""The abstract values of gather views and atomics, and the global-memory accesses the global race check
reads (see checks/global_race.py).

A gather view keeps one index per tensor dimension: a `Reg` (an index tile, whose `value` maps symbolic tile
coordinates to the index when the analysis can compute it) or a scalar term. A gathered element carries the
tag the tensor's tag function gives at its index; where the index is data (a loaded tile) the tag is TOP.
Every global store, load and atomic becomes a `GAccess`: its point, and a function from symbolic tile
coordinates to the tensor indices it touches (None where unknown: any element).
"""

from __future__ import annotations

from dataclasses import dataclass

from tilepy import ir
from tilepy.symbolic import Var
from tilepy.types import TensorType

from .events import UNKNOWN, GView, Reg, fresh, intlike
from .tagterms import TOP, Alt
from .vc import const_of


@dataclass(eq=False)
class GGather:
    param: str
    type: TensorType
    dims: tuple  # Syms / ints
    index: tuple  # per dimension: a Reg (index tile) or a scalar term (UNKNOWN: not modelled)
    shape: tuple
    span: object

    def global_coords(self, coords):
        """The tensor index per dimension at symbolic tile coordinates (None where not modelled)."""
        out = []
        for ix in self.index:
            if isinstance(ix, Reg):
                if ix.value is None:
                    out.append(None)
                    continue
                vs = ix.type.shape
                cc = tuple(0 if n == 1 and m != 1 else c for c, n, m in zip(coords, vs, self.shape))
                v = ix.value(cc)
                out.append(v if v is not UNKNOWN and intlike(v) else None)
            else:
                out.append(ix if ix is not UNKNOWN and intlike(ix) else None)
        return tuple(out)


@dataclass(eq=False)
class GAccess:
    """One global-memory access op: `kind` read | write | atomic over a tile of `shape`; `indices(coords)`
    gives the tensor index per dimension (None: unknown), `mask(coords)` a bool term (True: unmasked)."""

    op: object
    span: object
    point: object
    kind: str
    param: str
    dims: tuple
    shape: tuple
    indices: object
    mask: object


def gather_view(walker, e, st) -> GGather:
    base = walker.expr(e.args[0], st)
    index = []
    for a in e.args[1:]:
        v = walker.expr(a, st)
        index.append(v if v is not UNKNOWN and (intlike(v) or hasattr(v, "type")) else UNKNOWN)
    dims = tuple(d if isinstance(d, int) else Var(f"dim:{d}") for d in base.type.shape)
    return GGather(base.param, base.type, dims, tuple(index), tuple(e.type.shape), e.span)


def gather_tag(walker, g: GGather):
    """Tags of a gather's elements: the tensor's tag function at each element's index."""
    fn = walker.tensor_tags.get(g.param)
    if fn is None:
        return None
    if g.param in walker.written_tensors:
        return lambda c: [Alt(True, TOP, g.span)]

    def tag(c):
        from .tagterms import Unknown, eval_tagfn

        idx = g.global_coords(c)
        if any(i is None for i in idx):
            return [Alt(True, TOP, g.span)]
        try:
            return [Alt(True, eval_tagfn(fn, list(idx)), g.span)]
        except Unknown:
            return [Alt(True, TOP, g.span)]

    return tag


@dataclass(eq=False)
class Ticket:
    """`tp.atomic_add(L[x:x + 1], 1, sem=...)` on one element, its old value used: a ticket. `var` is the old
    value (a fresh variable per instance: renamed per iteration of the loops around it and per block), `access`
    the atomic's GAccess, `sem` its memory order, `unit` whether it adds the constant 1 and is unmasked (the
    last-arriver protocol of checks/global_race.py counts on that)."""

    var: Var
    access: GAccess
    sem: str
    unit: bool


def atomic(walker, e, st):
    """An atomic update: a global write; its old values are data (TOP tags). The old value of a one-element
    atomic_add is a fresh variable (a Ticket), so a mask `ticket == parts - 1` keeps its term and the global
    race check can model the last-arriver protocol; any other old value is unknown."""
    dst = walker.expr(e.args[0], st)
    nvals = 2 if e.op == "atomic_cas" else 1
    vals = [walker.expr(a, st) for a in e.args[1:]]
    n = len(walker.A.global_accesses)
    record(walker, e, st, "atomic", dst, e.args[1 + nvals] if e.attrs.get("masked") else None)
    value = None
    if e.op == "atomic_add" and e.type.dtype.is_int and all(d == 1 for d in e.type.shape) \
            and isinstance(dst, GView):
        var = fresh("ticket")
        if st.loops and var.name not in st.loops[-1].derived:
            st.loops[-1].derived.append(var.name)  # one old value per iteration
        value = lambda c, var=var: var  # noqa: E731
        if len(walker.A.global_accesses) > n:
            inc = vals[0]
            if isinstance(inc, Reg) and inc.value is not None:
                inc = inc.value(tuple(0 for _ in inc.type.shape))
            unit = intlike(inc) and const_of(inc) == 1 and not e.attrs.get("masked")
            walker.A.tickets[var.name] = Ticket(var, walker.A.global_accesses[-1], e.attrs.get("sem", "relaxed"),
                                                unit)
    return Reg(e.type, lambda c: [Alt(True, TOP, e.span)], value, (), e.span)


# ops a mask expression may hold and still be evaluated again for its value: no memory access, no effect
_PURE_OPS = frozenset({"block_id", "num_blocks", "thread_id", "lane_id", "warp_id", "warpgroup_id", "dim", "cdiv",
                       "min", "max", "zeros", "full", "arange", "expand_dims", "convert_layout", "cast", "where",
                       "maximum", "minimum", "permute", "reshape", "cluster_rank",
                       "tile_window"})


def _pure(e) -> bool:
    """Whether evaluating expression `e` again records nothing (no load, gather or other memory op in it)."""
    return e is not None and all(not isinstance(x, ir.Call) or x.op in _PURE_OPS for x in ir.walk_exprs(e))


def record(walker, e, st, kind, view, mask_expr=None):
    """Remember one global access for the global race check (views and gathers; others are ignored). A mask
    given as a variable, or as an expression without memory ops (`_pure`), restricts the elements (its value
    map, where known); any other mask is ignored, which over-approximates the elements touched (evaluating it
    again could record its accesses twice)."""
    if not walker.recording:
        return
    mask = walker.expr(mask_expr, st) if isinstance(mask_expr, ir.Var) or _pure(mask_expr) else None
    if isinstance(view, GGather):
        indices, shape, param, dims = view.global_coords, view.shape, view.param, view.dims
    elif isinstance(view, GView):
        indices, shape, param, dims = view.global_coords, view.shape, view.param, view.dims
    else:
        return

    def mask_at(c, mask=mask, shape=shape):
        if not isinstance(mask, Reg) or mask.value is None:
            return True
        cc = tuple(0 if n == 1 and m != 1 else x for x, n, m in zip(c, mask.type.shape, shape))
        v = mask.value(cc)
        return True if v is UNKNOWN or isinstance(v, int) and not isinstance(v, bool) else v

    walker.A.global_accesses.append(GAccess(e, e.span, walker.point(st, e.span), kind, param, dims, shape,
                                            indices, mask_at))
