"""Pre-pass analysis of the renderer: before any statement is rendered, every shared tile and mbarrier gets its
fixed offset in the block's shared memory, and a dry walk finds which warp roles arrive on each mbarrier. The
static per-thread values of role conditions (which thread range a branch runs on) are computed here too, for
the pre-pass and for the walk alike."""

from __future__ import annotations

import numpy as np

from tilepy import ir
from tilepy.errors import Span
from tilepy.thread_values import static_thread_values
from tilepy.types import ScalarType, SharedType

from .cexpr import cname
from .refs import SharedAlloc


class AnalysisOps:
    """Mixin of `walk.Renderer`: shared-memory placement and role analysis."""

    def place_shared(self, body):
        """Fix the offset of every shared tile and mbarrier (they are allocated at the top level)."""
        self.prologue("extern __shared__ __align__(1024) unsigned char tp_smem[];")
        for s in ir.walk(body):
            if not isinstance(s, ir.Assign) or not isinstance(s.value, ir.Call):
                continue
            if s.value.op == "shared":
                st: SharedType = s.value.type
                align = self.t.shared_align(st)
                off = -(-self.smem_top // align) * align
                self.smem_top = off + st.nbytes
                self.smem_allocs[id(s.value)] = SharedAlloc(cname(s.name), st, off)
            elif s.value.op == "mbarrier":
                off = -(-self.smem_top // 8) * 8
                self.smem_top = off + 8 * (s.value.attrs.get("stages") or 1)  # an array: one per stage
                self.mbarriers[id(s.value)] = off
        if self.smem_top > self.t.smem_bytes:
            raise self.error(
                f"shared tiles need {self.smem_top} bytes, over the {self.t.smem_bytes} bytes a block has",
                "use smaller tiles or fewer stages",
                Span(self.kir.file, self.kir.line, 0),
            )

    def find_arrivals(self, body):
        """Which roles (by thread count) arrive on each mbarrier: a dry walk tracking role ranges."""
        saved = dict(self.static_values), self.ctx.role

        def walk(stmts):
            for s in stmts:
                if (
                    isinstance(s, ir.Assign)
                    and isinstance(s.value.type, ScalarType)
                    and not s.value.type.uniform
                ):
                    vals = self.thread_values(s.value)
                    if vals is not None:
                        self.static_values[s.name] = vals
                elif isinstance(s, ir.Eval) and s.call.op == "mbarrier_arrive":
                    bar = s.call.args[0]
                    if isinstance(bar, ir.Call) and bar.op == "mbarrier_at":  # one mbarrier of an array
                        bar = bar.args[0]
                    if isinstance(bar, ir.Var):
                        self.arrival_roles.setdefault(bar.name, set()).add(self.role_range()[1])
                        if len(s.call.args) > 1:   # cta=: a remote arrival (per warp, sm90a.emit_mbarrier_arrive)
                            self.remote_bars.add(bar.name)
                elif isinstance(s, ir.For):
                    walk(s.body)
                elif isinstance(s, ir.If):
                    prev = self.ctx.role
                    divergent = s.kind == "role" or not getattr(s.cond.type, "uniform", True)
                    then_role, else_role = self.role_ranges(s.cond) if divergent else (prev, prev)
                    if divergent and (then_role is None or else_role is None):
                        then_role = else_role = (-1, -1)  # unknown: forces the elected-thread arrival
                    self.ctx.role = then_role
                    walk(s.then)
                    self.ctx.role = else_role
                    walk(s.orelse)
                    self.ctx.role = prev

        try:
            walk(body)
        finally:
            self.static_values, self.ctx.role = saved
        for name, sizes in self.arrival_roles.items():
            if any(n <= 0 for n in sizes):
                self.arrival_roles[name] = {0, -1}

    def thread_values(self, e):
        """Values per thread (a numpy array over the block) of an expression of thread ids and constants:
        the same evaluation the front end used to lay tiles over the role (tilepy.thread_values)."""
        return static_thread_values(e, np.arange(self.kir.num_threads), self.t.warp_size, self.static_values)

    def role_ranges(self, cond):
        """Thread ranges of the two branches of a role `if`, when the condition is a static function of the
        thread id selecting a contiguous range (as the front end lays tiles over a role's threads)."""
        lo0, n0 = self.role_range()
        mask = self.thread_values(cond)
        if mask is None:
            return None, None
        tids = np.arange(self.kir.num_threads)
        mask = np.broadcast_to(np.asarray(mask, dtype=bool), tids.shape)
        here = (tids >= lo0) & (tids < lo0 + n0)

        def rng(m):
            sel = tids[m & here]
            if sel.size == 0 or sel[-1] - sel[0] + 1 != sel.size:
                return None
            return int(sel[0]), int(sel.size)

        return rng(mask), rng(~mask)
