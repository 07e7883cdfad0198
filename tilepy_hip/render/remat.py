"""Rematerialized index tiles: a register tile computed from `tp.arange`, constants and uniform scalars
(`i = i0 + tp.arange(BLOCK)`, `m = (m0 + tp.arange(BM))[:, None]`) is cheap to recompute at each use, in the
layout the use needs, instead of moving its registers between threads through shared memory (which also
needs barriers, so it cannot run in a warp-role branch). The renderer walks the kernel in program order;
a definition may be re-planned at a use while nothing it reads has been assigned since (versions), and no
enclosing loop entered since the definition assigns any of it (a later iteration would see new values).
"""

from __future__ import annotations

from dataclasses import dataclass

from tilepy import ir
from tilepy.types import RegType

# ops whose value is a function of their operands and the tile coordinate only (no memory, no threads)
CHEAP_OPS = frozenset({"arange", "expand_dims", "cast", "full", "zeros", "where", "maximum", "minimum", "permute",
                       "tile_window"})


@dataclass
class Definition:
    expr: object
    versions: dict  # name -> version when defined (the tile's own name included)
    depth: int  # loops open at the definition


def _cheap(e) -> bool:
    if isinstance(e, ir.Const | ir.Var):
        return True
    if isinstance(e, ir.BinOp):
        return _cheap(e.lhs) and _cheap(e.rhs)
    if isinstance(e, ir.UnOp):
        return _cheap(e.operand)
    if isinstance(e, ir.Call):
        return e.op in CHEAP_OPS and all(_cheap(a) for a in e.args if isinstance(a, ir.Expr))
    return False


def _names(e) -> set:
    return {x.name for x in ir.walk_exprs(e) if isinstance(x, ir.Var)}


def assigned_names(stmts) -> set:
    out = set()
    for s in ir.walk(stmts):
        if isinstance(s, ir.Assign):
            out.add(s.name)
        elif isinstance(s, ir.For):
            out.add(s.var)
    return out


class RematOps:
    def _remat_state(self):
        if not hasattr(self, "_remat"):
            self._remat, self._versions, self._loop_sets = {}, {}, []
        return self._remat, self._versions, self._loop_sets

    def note_assign(self, name: str, value):
        """Called for every assignment (tile, scalar, loop variable), before the next statement."""
        remat, versions, loops = self._remat_state()
        versions[name] = versions.get(name, 0) + 1
        remat.pop(name, None)
        # `x = f(x)` reads the value it replaces: it cannot be recomputed later, when only the new x exists
        if isinstance(getattr(value, "type", None), RegType) and _cheap(value) and name not in _names(value):
            deps = _names(value) | {name}
            remat[name] = Definition(value, {d: versions.get(d, 0) for d in deps}, len(loops))

    def enter_loop(self, body):
        self._remat_state()[2].append(assigned_names(body))

    def exit_loop(self):
        self._remat_state()[2].pop()

    def after_branches(self, stmts):
        """After an `if`: what a branch assigned may or may not have happened."""
        remat, versions, _ = self._remat_state()
        for n in assigned_names(stmts):
            versions[n] = versions.get(n, 0) + 1
            remat.pop(n, None)

    def rematerialize(self, name: str):
        """The defining expression of tile `name` if it can be re-planned here, else None."""
        remat, versions, loops = self._remat_state()
        d = remat.get(name)
        if d is None or any(versions.get(n, 0) != v for n, v in d.versions.items()):
            return None
        if any(set(d.versions) & s for s in loops[d.depth:]):
            return None
        return d.expr
