"""The walk over the tile IR that every target shares: declarations, statements, loops and branches, shared-
memory values. Its pre-pass (shared placement, mbarrier arrivals) is in `analysis.py`, scalar expressions in
`scalars.py`, register-tile ops in `tiles.py`, copies in `copies.py`; what differs between targets comes from
the target's table (`targets.py`) and its instruction emitters.

Code shape: one `extern "C" __global__` function per kernel. Register tiles are per-thread C arrays
`T x[V]` indexed only with constants (every loop over values is unrolled here, in Python). All shared
tiles live in one dynamic shared-memory buffer at offsets fixed at compile time, followed by scratch space
for reductions and layout conversions. Each statement is preceded by `// tilepy: file:line`, which the build
uses to map C++ compiler errors back to the kernel's source.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilepy import dtypes as dt
from tilepy import ir
from tilepy.errors import CompileError, Span
from tilepy.layout import Layout
from tilepy.ops import ATOMICS, REDUCTIONS, SCANS
from tilepy.types import GatherTileType, GlobalTileType, MBarrierType, RegType, ScalarType, SharedType, TensorType

from .analysis import AnalysisOps
from .cexpr import cname, ctype, sym_c, var
from .copies import CopyOps
from .gathers import GatherOps
from .refs import SharedAlloc, SmemRef, TensorRef, ViewRef
from .remat import RematOps
from .scalars import ScalarOps
from .scans import ScanOps
from .tiles import TileOps, TileRef

# Ops that produce a whole register tile at once (written into an array); everything else on tiles is
# elementwise and rendered value by value.
MATERIALIZED = frozenset({"load", "mma", "convert_layout", "reshape", *REDUCTIONS, *ATOMICS, *SCANS})
NO_CODE = frozenset({"tag", "assert_tag", "schedule", "mma_operands"})


class Emitter:
    def __init__(self, depth: int = 1):
        self.lines: list[str] = []
        self.depth = depth

    def __call__(self, line: str = ""):
        self.lines.append("  " * self.depth + line if line else "")

    def open(self, head: str = ""):
        self(f"{head} {{" if head else "{")
        self.depth += 1

    def close(self, tail: str = ""):
        self.depth -= 1
        self("}" + tail)


@dataclass
class Context:
    span: Span | None = None
    loop_depth: int = 0
    divergent: int = 0  # inside a branch whose condition depends on the thread
    role: tuple | None = None  # (first thread, count) of a warp-role branch with a static thread range


SCRATCH_FRESH = 48 * 1024   # scratch bytes up to which every request gets bytes of its own (Renderer.scratch)


class Renderer(AnalysisOps, ScalarOps, TileOps, CopyOps, GatherOps, ScanOps, RematOps):
    """Render one specialized kernel (`KernelIR`) for one target (a `RenderTarget` table)."""

    MATERIALIZED = MATERIALIZED
    i32 = dt.i32

    def __init__(self, kir: ir.KernelIR, target):
        self.kir = kir
        self.t = target
        self.em = Emitter()
        self.prologue = Emitter()
        self.env: dict = {}
        self.ctx = Context()
        self._tmp = 0
        self._hoisted: dict[str, str] = {}
        self.smem_top = 0  # bytes used so far in tp_smem (user tiles first, then scratch)
        self.smem_allocs: dict[int, SharedAlloc] = {}
        self.mbarriers: dict[int, int] = {}
        self.uses: set[str] = set()
        self.notes: list[str] = []
        self.num_threads = kir.num_threads
        self.num_warps = kir.num_threads // target.warp_size
        self.tid_name = "tp_tid"
        self.static_values: dict = {}
        self.arrival_roles: dict = {}  # mbarrier variable -> sizes of the roles that arrive on it
        self.mbar_per_thread: dict = {}
        self.remote_bars: set = set()  # mbarrier variables some CTA of the cluster arrives on remotely (cta=)
        self.tensor_maps: list = []  # tma.TensorMapSpec per tensor-map parameter, in parameter order
        self.named_barriers: dict = {}  # (purpose, first thread, count) -> bar.sync id (1..15; 0 is __syncthreads)

    # ------------------------------------------------------------------ helpers
    def error(self, message: str, hint: str = "", span: Span | None = None) -> CompileError:
        return CompileError(f"{message} (target {self.t.name})", span or self.ctx.span, hint)

    def tmp(self, stem: str = "t") -> str:
        self._tmp += 1
        return f"tp_{stem}{self._tmp}"

    def hoist(self, expr: str, ctype_: str = "int", stem: str = "tc") -> str:
        """A per-thread value computed once at the kernel's start (thread coordinates, lane, warp)."""
        if expr.lstrip("-").isdigit():
            return expr
        if expr not in self._hoisted:
            name = f"tp_{stem}{len(self._hoisted)}"
            self._hoisted[expr] = name
            self.prologue(f"const {ctype_} {name} = {expr};")
        return self._hoisted[expr]

    def scratch(self, nbytes: int, align: int = 16, keep=None) -> int:
        """Reserve shared scratch after the user's tiles; returns the byte offset.

        Every use of scratch is transient: written, a barrier, read back into registers by the op that asks for
        it. While the kernel's scratch stays within SCRATCH_FRESH bytes (and the block's shared memory within
        the target's) each request gets bytes of its own (no barrier added); past that, ops outside
        thread-dependent branches share one region: a request that overlaps earlier scratch first emits a
        barrier (every thread has read what was there), and a kernel of many large reductions or conversions (a
        bitonic sort's stages) needs only its largest. `keep` (offset, bytes): a region of the same op still to
        be read, not overlapped. Scratch asked inside a thread-dependent branch always gets bytes of its own
        (warp roles run at the same time)."""
        regions = self.__dict__.setdefault("_scratch_regions", [])   # (start, end, reusable)
        base = self.__dict__.setdefault("_scratch_base", self.smem_top)
        top = -(-self.smem_top // align) * align
        if self.ctx.divergent or (top + nbytes - base <= SCRATCH_FRESH and top + nbytes <= self.t.smem_bytes):
            off = top
        else:
            blocked = [(a, b) for a, b, reusable in regions if not reusable]
            if keep is not None:
                blocked.append((keep[0], keep[0] + keep[1]))
            off = -(-base // align) * align
            moved = True
            while moved:
                moved = False
                for a, b in blocked:
                    if off < b and a < off + nbytes:
                        off, moved = -(-b // align) * align, True
            if any(off < b and a < off + nbytes for a, b, _ in regions):
                self.barrier()   # an earlier op's threads may still read these bytes
        regions.append((off, off + nbytes, not self.ctx.divergent))
        self.smem_top = max(self.smem_top, off + nbytes)
        if self.smem_top > self.t.smem_bytes:
            raise self.error(
                f"shared memory use reaches {self.smem_top} bytes with the scratch space for "
                f"reductions and layout conversions, over the {self.t.smem_bytes} bytes a block has",
                "use smaller register tiles or fewer shared stages",
            )
        return off

    def thread_part(self, layout, d: int) -> str:
        """C name of the thread's share of tile coordinate `d` under a thread-value layout."""
        ts, _ = layout.strides[d]
        expr = Layout(layout.thread_shape, ts)(var(self.layout_tid(layout)))
        return self.hoist(sym_c(expr))

    def layout_tid(self, layout) -> str:
        """The thread index a layout is written over: the block's, or the role's (renumbered from 0)."""
        n = layout.num_threads
        if n == self.kir.num_threads:
            return "tp_tid"
        lo, size = self.role_range()
        if n == size:
            return self.role_tid(lo, size)
        raise self.error(
            f"a tile laid out over {n} threads is used where {size} threads run",
            "lay the tile out over the threads of the role that uses it",
        )

    def role_tid(self, lo: int, size: int) -> str:
        """C expression of the thread's index within the role of threads [lo, lo + size), renumbered from 0:
        `tp_tid - lo`, hoisted. In a kernel declared with `unsigned_role_index` (`@tp.kernel`), outside loops and for
        a role of a power-of-two size, written at each use as `(int)((unsigned)(tp_tid - lo) % size)` instead: the
        identity for the role's own threads (the only ones that use it), known to lie in [0, size), so a layout's
        divisions and remainders of it are shifts and masks (signed, 20-40 SASS instructions per element of
        gemm_splitk_swap K_WAYS=2's hand-over and C^T store; G33, G37: 0.6-1.1 us a call faster). Not the default
        (G37, benchmarks/NOTES.md "G37"): hoisted into one variable it made ptxas spill 76 bytes in the large grouped
        GEMM (G33); written inside loops it made gemm_fp32 rebuild its swizzled register-A addresses every k-tile
        (128 x 64: 1784 -> 1968 SASS instructions, 9% slower, G38); and even outside loops only it made gemm_fp32's
        128 x 128 register-A form spill 272 bytes (its epilogue's coordinates then recomputed beside the loop's)."""
        if not lo:
            return "tp_tid"
        if not self.kir.unsigned_role_index or self.ctx.loop_depth or size & (size - 1):
            return self.hoist(f"tp_tid - {lo}", stem="rt")
        return f"((int)((unsigned)(tp_tid - {lo}) % {size}u))"

    def role_range(self) -> tuple[int, int]:
        """(first thread, thread count) of the threads running the current statement."""
        return self.ctx.role or (0, self.kir.num_threads)

    def scalar_bar(self, e) -> str:
        if isinstance(e, ir.Var) and isinstance(self.env.get(e.name), str):
            return self.env[e.name]
        raise self.error("expected an mbarrier variable")

    def value_part(self, layout, d: int, v: int) -> int:
        _, vs = layout.strides[d]
        return int(Layout(layout.value_shape, vs)(v))

    def barrier(self):
        self.em(self.t.barrier)

    def named_barrier_id(self, purpose: str, lo: int, size: int) -> int:
        """A hardware named-barrier id (1..15) of its own for each (purpose, thread range): two different
        thread sets never share one."""
        key = (purpose, lo, size)
        if key not in self.named_barriers:
            if len(self.named_barriers) == 15:
                raise self.error("more than 15 named barriers (role synchronizations) in one kernel",
                                 "use fewer distinct warp roles")
            self.named_barriers[key] = len(self.named_barriers) + 1
        return self.named_barriers[key]

    # ------------------------------------------------------------------ top level
    def render(self) -> str:
        kir = self.kir
        params = self._params()
        self.place_shared(kir.body)
        self.find_arrivals(kir.body)
        self._declare_vars()
        self.prologue("const int tp_tid = (int)hipThreadIdx_x;")
        self.prologue(f"const int tp_lane = tp_tid % {self.t.warp_size};")
        self.prologue(f"const int tp_warp = tp_tid / {self.t.warp_size};")
        self.prologue("(void)tp_lane; (void)tp_warp;")
        self.stmts(kir.body)
        if self.tensor_maps:  # after the signature's own parameters, filled in by the launch (launch.py)
            params += [f"const __grid_constant__ tp_tensor_map tp_tmap{i}" for i in range(len(self.tensor_maps))]
            params.append("const unsigned tp_tma_ok")
        head = [
            f"// Generated by tilepy_hip for target {self.t.name} from kernel `{kir.name}` "
            f"({kir.file}:{kir.line}).",
            f"// constexprs: {', '.join(f'{k}={v!r}' for k, v in kir.constexprs.items()) or 'none'}",
            f"// threads per block: {kir.num_threads}; dynamic shared memory: {self.smem_top} bytes",
            '#include "tilepy_hip.h"',
            "",
            f'extern "C" __global__ void {self._launch_bounds()} '
            f"{kir.name}({', '.join(params)}) {{",
        ]
        body = self.prologue.lines + self.decls + [""] + self.em.lines
        return "\n".join(head + body + ["}", ""])

    def _launch_bounds(self) -> str:
        text = self.t.launch_bounds.format(threads=self.kir.num_threads)
        uses = any(isinstance(x, ir.Eval) and x.call.op == "setmaxnreg" for x in ir.walk(self.kir.body))
        if uses and text.endswith(")"):
            text = text[:-1] + ", 1)"  # setmaxnreg needs a register cap at entry: one block per multiprocessor
        elif getattr(self.kir, "min_blocks", 0) and self.t.compiler == "nvrtc" and text.endswith(")"):
            # @tp.kernel(min_blocks=): registers for that many blocks per SM (HIP's second argument means another
            # thing: waves per execution unit, so AMD builds take none)
            text = text[:-1] + f", {self.kir.min_blocks})"
        cl = getattr(self.kir, "cluster", (1, 1, 1))
        if cl != (1, 1, 1):   # a thread-block cluster: compile-time dims, launched as they are
            text = f"__cluster_dims__({cl[0]}, {cl[1]}, {cl[2]}) {text}"
        return text

    @property
    def smem_bytes(self) -> int:
        return self.smem_top

    def _params(self) -> list[str]:
        out = []
        for p in self.kir.params:
            name = cname(p.name)
            if isinstance(p.type, TensorType):
                dims = []
                for i, d in enumerate(p.type.shape):
                    if isinstance(d, int):
                        dims.append(str(d))
                    else:
                        dims.append(f"{name}_d{i}")
                self.env[p.name] = TensorRef(name, p.type.dtype, dims, p.name)
                out.append(f"{ctype(p.type.dtype)}* {name}")
                out += [f"int {d}" for d in dims if not d.isdigit()]
            elif isinstance(p.type, ScalarType):
                self.env[p.name] = name
                out.append(f"{ctype(p.type.dtype)} {name}")
            else:
                raise self.error(
                    f"kernel parameter `{p.name}` has type {p.type}, which cannot be passed", span=p.span
                )
        return out

    def _declare_vars(self):
        """Every variable is declared once at the top (Python scoping: a name lives until the kernel ends)."""
        self.decls: list[str] = []
        params = {p.name for p in self.kir.params}
        for name, t in self.kir.var_types.items():
            if name in params:
                continue
            c = cname(name)
            if isinstance(t, ScalarType):
                self.decls.append(f"  {ctype(t.dtype)} {c};")
                self.env[name] = c
            elif isinstance(t, RegType):
                self.decls.append(f"  {ctype(t.dtype)} {c}[{t.layout.num_values}];")
                self.env[name] = TileRef(c, t.dtype, t.shape, t.layout)
            elif isinstance(t, GlobalTileType):
                self.env[name] = None  # bound at its assignment (see _assign_view)
            elif isinstance(t, SharedType | MBarrierType):
                self.env[name] = None  # bound at its allocation

    # ------------------------------------------------------------------ statements
    def stmts(self, stmts):
        for s in stmts:
            self.stmt(s)

    def stmt(self, s):
        prev = self.ctx.span
        self.ctx.span = s.span
        if not (isinstance(s, ir.Eval) and s.call.op in NO_CODE):
            self.em(f"// tilepy: {s.span.file}:{s.span.line}")
        try:
            getattr(self, f"stmt_{type(s).__name__}")(s)
        finally:
            self.ctx.span = prev

    def stmt_Assign(self, s: ir.Assign):
        t = s.value.type
        name = cname(s.name)
        if isinstance(t, ScalarType):
            self.em(f"{name} = {self.scalar_as(s.value, t.dtype)};")
            if not t.uniform:
                vals = self.thread_values(s.value) if not self.ctx.divergent else None
                if vals is None:
                    self.static_values.pop(s.name, None)
                else:
                    self.static_values[s.name] = vals
        elif isinstance(t, RegType):
            self.assign_tile(self.env[s.name], s.value, s.name)
        elif isinstance(t, SharedType):
            self._assign_shared(s)
        elif isinstance(t, GatherTileType):
            self.assign_gather(s)
        elif isinstance(t, GlobalTileType):
            self._assign_view(s)
        elif isinstance(t, MBarrierType):
            self._assign_mbarrier(s)
        else:
            raise self.error(f"cannot assign a value of type {t}")
        self.note_assign(s.name, s.value)

    def stmt_Eval(self, s: ir.Eval):
        call = s.call
        if call.op in NO_CODE:
            return
        handler = self.t.ops.get(call.op)
        if handler is None:
            raise self.error(f"tp.{call.op} has no rendering", self.t.hint(call.op))
        if isinstance(handler, str):
            if handler:
                self.em(handler.format(**call.attrs))
            if call.op == "wait_async" and self.t.fence_after_async_wait:
                self.em(self.t.proxy_fence)
            return
        handler(self, call)

    def stmt_For(self, s: ir.For):
        v = cname(s.var)
        self.ctx.loop_depth += 1
        self.note_assign(s.var, None)
        self.enter_loop(s.body + [s])
        try:
            if s.kind == "static":
                start, stop, step = (self._const(x) for x in (s.start, s.stop, s.step))
                for i in range(start, stop, step):
                    self.note_assign(s.var, None)  # each unrolled copy sees a new value
                    self.em.open()
                    self.em(f"{v} = {i};")
                    self.stmts(s.body)
                    self.em.close()
                return
            start, stop = self.scalar_as(s.start, dt.i32), self.scalar_as(s.stop, dt.i32)
            step = self.scalar_as(s.step, dt.i32) if s.step is not None else "1"
            self.em.open()
            end = self.tmp("end")
            self.em(f"const int {end} = {stop};")
            self.em.open(f"for ({v} = {start}; {v} < {end}; {v} += {step})")
            self.stmts(s.body)
            self.em.close()
            self.em.close()
        finally:
            self.ctx.loop_depth -= 1
            self.exit_loop()
            self.after_branches(s.body)

    def stmt_If(self, s: ir.If):
        cond = self.scalar_as(s.cond, dt.bool_)
        divergent = s.kind == "role" or not getattr(s.cond.type, "uniform", True)
        then_role = else_role = None
        if divergent:
            then_role, else_role = self.role_ranges(s.cond)
        saved = self.ctx.role
        self.ctx.divergent += divergent
        try:
            self.ctx.role = then_role if divergent else saved
            self.em.open(f"if ({cond})")
            self.stmts(s.then)
            if s.orelse:
                self.em.close()
                self.ctx.role = else_role if divergent else saved
                self.em.open("else")
                self.stmts(s.orelse)
            self.em.close()
        finally:
            self.ctx.divergent -= divergent
            self.ctx.role = saved
            self.after_branches(s.then + s.orelse)

    def _const(self, x) -> int:
        if isinstance(x, int):
            return x
        if isinstance(x, ir.Const):
            return int(x.value)
        raise self.error("a tp.static_range bound is not a compile-time integer")

    # ------------------------------------------------------------------ memory-space values
    def _assign_shared(self, s: ir.Assign):
        if s.value.op != "shared":  # a view of a shared tile (tp.transpose / tp.permute): bound, no code
            self.env[s.name] = self.smem_ref(s.value)
            return
        alloc = self.smem_allocs[id(s.value)]
        st = alloc.stype
        self.prologue(
            f"{ctype(st.dtype)}* const {alloc.name} = ({ctype(st.dtype)}*)(tp_smem + {alloc.offset});"
        )
        self.env[s.name] = alloc

    def _assign_view(self, s: ir.Assign):
        view = self.view_ref(s.value)
        name = cname(s.name)
        bound = self.env.get(s.name)
        starts = []
        for j, st in enumerate(view.starts):
            c = f"{name}_o{j}"
            if bound is None:
                self.decls.append(f"  int {c};")
            self.em(f"{c} = {st};")
            starts.append(c)
        if bound is not None and bound.tensor.ptr != view.tensor.ptr:
            raise self.error(
                f"`{s.name}` is reassigned to a view of another tensor", "use one variable per tensor's view"
            )
        self.env[s.name] = ViewRef(view.tensor, starts, view.sizes, view.squeeze)

    def _assign_mbarrier(self, s: ir.Assign):
        if isinstance(s.value, ir.Call) and s.value.op == "mbarrier_at":
            raise self.error("an mbarrier of an array is not a variable of its own",
                             "pass full[k % STAGES] to the mbarrier op directly")
        if self.ctx.loop_depth or self.ctx.divergent:
            raise self.error("tp.mbarrier() must be allocated at the top level of the kernel")
        handler = self.t.ops.get("mbarrier")
        if handler is None:
            raise self.error("tp.mbarrier has no rendering", self.t.hint("mbarrier"))
        off = self.mbarriers[id(s.value)]
        name = cname(s.name)
        self.prologue(f"unsigned long long* const {name}_p = (unsigned long long*)(tp_smem + {off});")
        name = f"{name}_p"
        self.env[s.name] = name
        handler(self, s.value, name, s.name)

    def view_ref(self, e) -> ViewRef:
        if isinstance(e, ir.Var):
            ref = self.env.get(e.name)
            if not isinstance(ref, ViewRef):
                raise self.error(f"`{e.name}` is not a global view here")
            return ref
        if not (isinstance(e, ir.Call) and e.op == "view"):
            raise self.error(f"expected a view of a global tensor, got {e.type}")
        tensor = self.env[e.args[0].name]
        starts = [self.scalar_as(a, dt.i32) for a in e.args[1:]]
        return ViewRef(tensor, starts, tuple(e.attrs["sizes"]), tuple(e.attrs["squeeze"]))

    def smem_ref(self, e) -> SmemRef:
        if isinstance(e, ir.Call) and e.op == "shared_permute":  # same memory, the layout's modes permuted
            base = self.smem_ref(e.args[0])
            return SmemRef(base.ptr, base.stype.permute(tuple(e.attrs["dims"])), base.offset, base.align)
        if isinstance(e, ir.Call) and e.op == "shared_window":  # the window's element 0 as the base pointer
            base = self.smem_ref(e.args[0])
            wtype, origin = base.stype.window(tuple(e.attrs["starts"]), tuple(e.attrs["sizes"]),
                                              tuple(e.attrs["squeeze"]))
            if not origin:
                return SmemRef(base.ptr, wtype, base.offset, base.align)
            nbytes = origin * wtype.dtype.bytes
            return SmemRef(f"({base.ptr} + {origin})", wtype, f"({base.offset} + {nbytes})",
                           min(base.align, nbytes & -nbytes))
        if isinstance(e, ir.Var):
            alloc = self.env.get(e.name)
            if isinstance(alloc, SmemRef):
                return alloc
            if isinstance(alloc, SharedAlloc):
                if alloc.stype.stages is not None:
                    raise self.error(f"`{e.name}` has {alloc.stype.stages} stages; index one")
                return SmemRef(alloc.name, alloc.stype, str(alloc.offset), self.t.shared_align(alloc.stype))
            raise self.error(f"`{e.name}` is not a shared tile here")
        if isinstance(e, ir.Call) and e.op == "stage":
            base = e.args[0]
            alloc = self.env.get(base.name) if isinstance(base, ir.Var) else None
            if not isinstance(alloc, SharedAlloc):
                raise self.error("tp stage of something that is not a shared tile")
            st = alloc.stype.stage()
            idx = self.scalar_as(e.args[1], dt.i32)
            elems, nbytes = st.stage_elems, st.stage_elems * st.dtype.bytes
            return SmemRef(
                f"({alloc.name} + ({idx}) * {elems})",
                st,
                f"({alloc.offset} + ({idx}) * {nbytes})",
                self.t.shared_align(alloc.stype) if nbytes % self.t.shared_align(alloc.stype) == 0
                else min(16, nbytes & -nbytes),   # stage k starts k * nbytes bytes on
            )
        raise self.error(f"expected a shared tile, got {e.type}")


__all__ = ["MATERIALIZED", "NO_CODE", "Renderer"]
