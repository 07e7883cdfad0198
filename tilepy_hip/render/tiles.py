"""Register tiles: elementwise expressions value by value, loads and stores through views, reductions with
warp shuffles and a shared scratch across warps, layout conversions through shared memory, MMA dispatch.

A register tile with layout L is the array `T x[V]` in every thread; thread t's value v is the element at
coordinate L(t, v) = thread_part(t) + value_part(v) per dimension (the layout is affine in each). The
thread part is a C variable computed once per kernel; the value part is a Python int. An elementwise
expression is rendered once per value v of the result; each operand tile is read at the value index that
holds the same element in the same thread (found by comparing coordinate tables), or, when its layout
puts that element in another thread, after a trip through shared memory.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from itertools import product as cartesian

import numpy as np

from tilepy import dtypes as dt
from tilepy import ir
from tilepy.banks import bank_turn
from tilepy.ops import ATOMICS, REDUCTIONS, SCANS
from tilepy.symbolic import Const
from tilepy.tv_layout import TVLayout
from tilepy.types import GatherTileType, GlobalTileType, RegType, SharedType

from .cexpr import cast, compute_type, ctype, is_half, literal, sym_c, var
from .refs import SmemRef


@dataclass
class TileRef:
    name: str
    dtype: dt.DType
    shape: tuple
    layout: TVLayout | None  # None: a gathered array read only with identity value indices


@dataclass
class Coord:
    """One tile dimension's coordinate at every value slot: thread part (a C name, or None for 0) plus a
    constant per value; `arr` is the [threads, values] table of the same numbers."""

    tname: str | None
    vals: list
    arr: np.ndarray

    def c(self, v: int) -> str:
        k = self.vals[v]
        if self.tname is None:
            return str(k)
        return f"({self.tname} + {k})" if k else self.tname

    def sym(self, v: int):
        k = self.vals[v]
        return Const(k) if self.tname is None else var(self.tname) + k


_SIMPLE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*|\(?-?[0-9.e+-]+(f|LL|u)?\)?|\(?-?TP_(INF|NAN)\)?)$")


def _simple(text: str) -> bool:
    """A C name or literal: cheap to repeat in every value's expression."""
    return bool(_SIMPLE.match(text))


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _colex(v: int, shape) -> list[int]:
    out = []
    for n in shape:
        out.append(v % n)
        v //= n
    return out


BANK_TURN_ENV = "TILEPY_HIP_BANK_TURN"       # "0": every register tile's shared stores in value order


class TileOps:
    # ------------------------------------------------------------------ coordinates
    def out_coords(self, layout: TVLayout) -> list[Coord]:
        V = layout.num_values
        coords = []
        for d in range(len(layout.tile)):
            tname = self.thread_part(layout, d)
            coords.append(
                Coord(
                    None if tname == "0" else tname,
                    [self.value_part(layout, d, v) for v in range(V)],
                    layout.coords[d],
                )
            )
        return coords

    @staticmethod
    def _zero_like(c: Coord) -> Coord:
        return Coord(None, [0] * len(c.vals), np.zeros_like(c.arr))

    def _bcast(self, coords, shape, operand):
        t = getattr(operand, "type", None)
        if not isinstance(t, RegType):
            return None
        if len(t.shape) != len(shape):
            raise self.error(f"operand of shape {t.shape} in an expression of shape {shape}")
        return [c if n == m else self._zero_like(c) for c, n, m in zip(coords, t.shape, shape)]

    def slot_map(self, ref: TileRef, coords) -> list[int] | None:
        """For each value slot of `coords`, the value index of `ref` holding that element in the same thread."""
        V = len(coords[0].vals) if coords else None
        if not ref.shape:
            return [0] * (V or 1)
        L = ref.layout
        if L is None or L.num_threads != coords[0].arr.shape[0]:
            return None
        have = np.ravel_multi_index(L.coords, ref.shape)
        want = np.ravel_multi_index(tuple(c.arr for c in coords), ref.shape)
        table = {}
        for v in range(have.shape[1]):
            table.setdefault(np.ascontiguousarray(have[:, v]).tobytes(), v)
        out = [table.get(np.ascontiguousarray(want[:, v]).tobytes()) for v in range(want.shape[1])]
        return None if None in out else out

    # ------------------------------------------------------------------ elementwise planning
    def plan(self, e, coords):
        """(fn(v) -> C text of the value at slot v, dtype) for a tile or scalar expression."""
        t = getattr(e, "type", None)
        if not isinstance(t, RegType):
            text, d = self.scalar(e)
            if not _simple(text):
                name = self.tmp("s")
                self.em(f"const {ctype(d)} {name} = {text};")
                text = name
            return (lambda v: text), d
        shape = t.shape
        if isinstance(e, ir.Var):
            ref = self.env[e.name]
            if self.slot_map(ref, coords) is None:  # held in another layout: recompute it if it is cheap
                again = self.rematerialize(e.name)
                if again is not None:
                    return self.plan(again, coords)
            return self.leaf(ref, coords), t.dtype
        if isinstance(e, ir.BinOp):
            fa, ad = self.plan(e.lhs, self._bcast(coords, shape, e.lhs))
            fb, bd = self.plan(e.rhs, self._bcast(coords, shape, e.rhs))
            return (lambda v: self.binop_c(e.op, fa(v), ad, fb(v), bd, t.dtype)), t.dtype
        if isinstance(e, ir.UnOp):
            fa, ad = self.plan(e.operand, self._bcast(coords, shape, e.operand))
            return (lambda v: self.unop_c(e.op, fa(v), ad, t.dtype)), t.dtype
        if not isinstance(e, ir.Call):
            raise self.error(f"cannot render {e!r}")
        op = e.op
        if op in self.MATERIALIZED:
            return self.leaf(self.materialize(e), coords), t.dtype
        if op == "expand_dims":
            axis = e.attrs["axis"]
            return self.plan(e.args[0], coords[:axis] + coords[axis + 1 :])
        if op == "permute":  # x's axis d is the result's axis dims.index(d): only the coordinates move
            dims = e.attrs["dims"]
            return self.plan(e.args[0], [coords[dims.index(d)] for d in range(len(dims))])
        if op == "tile_window":  # x's element at the window's start plus the coordinate (held in place)
            return self.plan(e.args[0], [Coord(c.tname, [k + a for k in c.vals], c.arr + a) if a else c
                                         for c, a in zip(coords, e.attrs["starts"])])
        if op == "zeros":
            text = literal(0, t.dtype)
            return (lambda v: text), t.dtype
        if op == "full":
            text = self.scalar_as(e.args[0], t.dtype)
            if not _simple(text):
                name = self.tmp("s")
                self.em(f"const {ctype(t.dtype)} {name} = {text};")
                text = name
            return (lambda v: text), t.dtype
        if op == "arange":
            c = coords[0]
            return (lambda v: c.c(v)), t.dtype
        if op in self.t.elementwise_ops:
            subs = [self.plan(a, self._bcast(coords, shape, a)) for a in e.args]
            return (lambda v: self.elementwise_c(e, [(f(v), d) for f, d in subs])), t.dtype
        raise self.error(f"tp.{op} has no rendering on register tiles", self.t.hint(op))

    def leaf(self, ref: TileRef, coords):
        m = self.slot_map(ref, coords)
        if m is None:
            ref = self.gather(ref, coords)
            return lambda v: f"{ref.name}[{v}]"
        return lambda v: f"{ref.name}[{m[v]}]"

    @staticmethod
    def refers(e, name: str) -> bool:
        return any(isinstance(x, ir.Var) and x.name == name for x in ir.walk_exprs(e))

    # ------------------------------------------------------------------ assignment and materialization
    def assign_tile(self, dst: TileRef, value, name: str):
        V = dst.layout.num_values
        if isinstance(value, ir.Call) and value.op in self.MATERIALIZED:
            in_place_mma = (
                value.op == "mma"
                and isinstance(value.args[2], ir.Var)
                and value.args[2].name == name
                and not any(self.refers(a, name) for a in value.args[:2])
            )
            if self.refers(value, name) and not in_place_mma:
                tmp = self.materialize(value)
                self.copy_tile(tmp, dst)
            else:
                self.materialize(value, dst)
            return
        coords = self.out_coords(dst.layout)
        f, d = self.plan(value, coords)
        if self.refers(value, name):
            tmp = self.tmp()
            self.em(f"{ctype(dst.dtype)} {tmp}[{V}];")
            for v in range(V):
                self.em(f"{tmp}[{v}] = {cast(f(v), d, dst.dtype)};")
            for v in range(V):
                self.em(f"{dst.name}[{v}] = {tmp}[{v}];")
            return
        for v in range(V):
            self.em(f"{dst.name}[{v}] = {cast(f(v), d, dst.dtype)};")

    def copy_tile(self, src: TileRef, dst: TileRef):
        coords = self.out_coords(dst.layout)
        f = self.leaf(src, coords)
        for v in range(dst.layout.num_values):
            self.em(f"{dst.name}[{v}] = {cast(f(v), src.dtype, dst.dtype)};")

    def new_tile(self, t: RegType) -> TileRef:
        ref = TileRef(self.tmp(), t.dtype, t.shape, t.layout)
        self.em(f"{ctype(t.dtype)} {ref.name}[{t.layout.num_values}];")
        return ref

    def materialize(self, e: ir.Call, dst: TileRef | None = None) -> TileRef:
        dst = dst or self.new_tile(e.type)
        if e.op == "load":
            self.emit_load(e, dst)
        elif e.op in REDUCTIONS:
            self.emit_reduce(e, dst)
        elif e.op == "mma":
            self.emit_mma(e, dst)
        elif e.op in ATOMICS:
            self.emit_atomic(e, dst)
        elif e.op in SCANS:
            self.emit_scan(e, dst)
        elif e.op == "reshape":
            self.emit_reshape(e, dst)
        elif e.op == "convert_layout":
            src = self.operand_ref(e.args[0])
            self.exchange(src, self.out_coords(dst.layout), dst.name)
        else:
            raise self.error(f"tp.{e.op} has no rendering", self.t.hint(e.op))
        return dst

    def operand_ref(self, e) -> TileRef:
        """A register-tile operand as an array: a variable, or a temporary holding the expression."""
        if isinstance(e, ir.Var) and isinstance(self.env.get(e.name), TileRef):
            return self.env[e.name]
        if isinstance(e, ir.Call) and e.op in self.MATERIALIZED:
            return self.materialize(e)
        dst = self.new_tile(e.type)
        self.assign_tile(dst, e, dst.name)
        return dst

    # ------------------------------------------------------------------ through shared memory
    def owner(self, layout: TVLayout):
        """(C condition on the thread or None, keep[v]): which slots write an element held several times, so
        each element is written once, by the lowest thread holding it (the op catalogue's rule for stores)."""
        conds, p = [], 1
        for i, n in enumerate(layout.thread_shape):
            if n > 1 and all(layout.strides[d][0][i] == 0 for d in range(len(layout.tile))):
                conds.append(f"(tp_tid / {p}) % {n} == 0" if p > 1 else f"tp_tid % {n} == 0")
            p *= n
        T, V = layout.num_threads, layout.num_values
        flat = layout.flat if layout.tile else np.zeros((T, V), dtype=np.int64)
        keep = [True] * V
        for v in range(V):
            for w in range(v):
                if keep[w] and np.array_equal(flat[:, v], flat[:, w]):
                    keep[v] = False
                    break
        # Check: every element written exactly once, by the lowest thread that holds it.
        t_idx = np.arange(T)
        ok = np.ones(T, dtype=bool)
        q = 1
        for i, n in enumerate(layout.thread_shape):
            if n > 1 and all(layout.strides[d][0][i] == 0 for d in range(len(layout.tile))):
                ok &= (t_idx // q) % n == 0
            q *= n
        writes = flat[ok][:, keep].ravel()
        if len(np.unique(writes)) != len(writes):
            raise self.error(
                f"cannot pick one writer per element for layout {layout}",
                "convert_layout to a layout without partial replication first",
            )
        cond = " && ".join(f"({c})" for c in conds) or None
        return cond, keep

    def flat_index(self, coords, shape, v: int) -> str:
        terms, stride = [], 1
        for c, n in reversed(list(zip(coords, shape))):
            terms.append(c.c(v) if stride == 1 else f"{c.c(v)} * {stride}")
            stride *= n
        return " + ".join(reversed(terms)) or "0"

    def need_uniform(self, what: str):
        if self.ctx.divergent:
            raise self.error(
                f"{what} needs every thread of the block (it uses barriers), but this code runs "
                "in a branch that depends on the thread",
                "move it out of the thread-dependent branch",
            )

    def sync_here(self, what: str):
        """A callable emitting a barrier over the threads that run this statement: __syncthreads outside
        thread-dependent branches; inside a warp role whose threads are a static range of whole warps (NVIDIA),
        the role's own named barrier (`bar.sync id, size`), which only the role's threads reach."""
        if not self.ctx.divergent:
            return self.barrier
        role = self.ctx.role
        if role is not None and self.t.warp_size == 32 and role[0] % 32 == 0 and role[1] % 32 == 0 \
                and role[1] < self.kir.num_threads:
            lo, size = role
            bid = self.named_barrier_id("role_sync", lo, size)
            return lambda: self.em(f'asm volatile("bar.sync %0, %1;" :: "r"({bid}), "r"({size}) : "memory");')
        self.need_uniform(what)
        return self.barrier

    def exchange(self, src: TileRef, coords, out: str):
        """out[v] = the element of `src` at coords(v), through a shared scratch tile (two barriers: over the
        block, or over a warp role's threads inside one)."""
        barrier = self.sync_here("a layout conversion")
        numel = int(np.prod(src.shape)) if src.shape else 1
        off = self.scratch(numel * max(src.dtype.bytes, 1), 16)
        buf = f"(({ctype(src.dtype)}*)(tp_smem + {off}))"
        cond, keep = self.owner(src.layout)
        src_coords = self.out_coords(src.layout)
        if self.ctx.loop_depth:
            barrier()  # the scratch may still be read by an earlier run of this statement
        for v in range(src.layout.num_values):
            if keep[v]:
                store = f"{buf}[{self.flat_index(src_coords, src.shape, v)}] = {src.name}[{v}];"
                self.em(f"if ({cond}) {store}" if cond else store)
        barrier()
        for v in range(len(coords[0].vals) if coords else 1):
            self.em(f"{out}[{v}] = {buf}[{self.flat_index(coords, src.shape, v)}];")

    def gather(self, ref: TileRef, coords) -> TileRef:
        V = len(coords[0].vals)
        out = TileRef(self.tmp("g"), ref.dtype, ref.shape, None)
        self.em(f"{ctype(ref.dtype)} {out.name}[{V}];")
        self.exchange(ref, coords, out.name)
        return out

    # ------------------------------------------------------------------ loads and stores
    def emit_load(self, e: ir.Call, dst: TileRef):
        src = e.args[0]
        other = self.scalar_as(e.args[1], dst.dtype)
        coords = self.out_coords(dst.layout)
        mask = None
        if e.attrs.get("masked"):
            mask = self.plan(e.args[2], self._bcast(coords, dst.shape, e.args[2]))
        self.em.open()
        if isinstance(src.type, GatherTileType):
            self.emit_gather_load(e, dst, coords, mask, other)
        elif isinstance(src.type, GlobalTileType):
            self.global_access(self.view_ref(src), dst.layout, coords, mask, "load", dst.name, other)
        else:
            sref = self.smem_ref(src)
            if e.attrs.get("cta") is not None:   # the same tile in CTA `cta` of the cluster (distributed shared memory)
                rp = self.tmp("rp")
                self.em(f"{ctype(sref.dtype)}* {rp} = tp_mapa({sref.ptr}, {int(e.attrs['cta'])});")
                sref = SmemRef(rp, sref.stype, sref.offset, sref.align)
            self.shared_access(sref, dst.layout, coords, mask, "load", dst.name, other)
        self.em.close()

    def emit_store(self, call: ir.Call):
        dst, value = call.args[0], call.args[1]
        t = value.type
        if not isinstance(t, RegType):
            raise self.error("tp.store of a non-tile value")
        coords = self.out_coords(t.layout)
        self.em.open()
        f, d = self.plan(value, coords)
        mask = None
        if call.attrs.get("masked"):
            mask = self.plan(call.args[2], self._bcast(coords, t.shape, call.args[2]))
        dtype = dst.type.dtype
        vals = self.tmp("v")
        self.em(f"{ctype(dtype)} {vals}[{t.layout.num_values}];")
        for v in range(t.layout.num_values):
            self.em(f"{vals}[{v}] = {cast(f(v), d, dtype)};")
        if isinstance(dst.type, GatherTileType):
            self.emit_gather_store(call, t.layout, coords, t.shape, mask, vals)
        elif isinstance(dst.type, GlobalTileType):
            self.global_access(self.view_ref(dst), t.layout, coords, mask, "store", vals)
        else:
            self.shared_access(self.smem_ref(dst), t.layout, coords, mask, "store", vals)
        self.em.close()

    def vector_width(self, layout: TVLayout, dtype, contiguous_last: bool) -> int:
        """Values per vector access: the first value mode runs along the tile's last (contiguous) dimension."""
        if not contiguous_last or not layout.tile or not layout.value_shape:
            return 1
        last = len(layout.tile) - 1
        n0 = layout.value_shape[0]
        if layout.strides[last][1][0] != 1 or any(layout.strides[d][1][0] for d in range(last)):
            return 1
        vec = 1
        while vec * 2 <= n0 and n0 % (vec * 2) == 0 and vec * 2 * dtype.bytes <= 16:
            vec *= 2
        while vec > 1:
            ts, vs = layout.strides[last]
            if all(s % vec == 0 for s in ts) and all(s % vec == 0 for s in vs[1:]):
                return vec
            vec //= 2
        return 1

    def global_access(self, view, layout, coords, mask, kind, arr, other=None):
        em = self.em
        ptr, dims = view.tensor.ptr, view.tensor.dims
        tdims = view.tile_dims
        V = layout.num_values
        cond, keep = self.owner(layout) if kind == "store" else (None, [True] * V)
        ti, st = [], []
        for j, start in enumerate(view.starts):
            name = self.tmp("i")
            d = tdims.index(j) if j in tdims else None
            tpart = coords[d].tname if d is not None else None
            em(f"const int {name} = {start}{f' + {tpart}' if tpart else ''};")
            ti.append((name, d))
            s = self.tmp("st")
            em(f"const long long {s} = {view.stride(j)};")
            st.append(s)
        tb = self.tmp("b")
        em(
            f"const long long {tb} = "
            + " + ".join(f"(long long){n} * {s}" for (n, _), s in zip(ti, st))
            + ";"
        )

        def idx(j, v):
            name, d = ti[j]
            k = coords[d].vals[v] if d is not None else 0
            return f"({name} + {k})" if k else name

        def off(v):
            parts = [tb] + [
                f"{coords[d].vals[v]} * {s}"
                for (n, d), s in zip(ti, st)
                if d is not None and coords[d].vals[v]
            ]
            return " + ".join(parts)

        def inb(v, dims_only=None):
            js = range(len(ti)) if dims_only is None else dims_only
            return " && ".join(f"(unsigned)({idx(j, v)}) < (unsigned)({dims[j]})" for j in js)

        ms = {}
        if mask is not None:
            fm, md = mask
            for v in range(V):
                ms[v] = self.tmp("m")
                em(f"const bool {ms[v]} = {cast(fm(v), md, dt.bool_)};")
        contiguous = bool(tdims) and tdims[-1] == len(view.starts) - 1
        vec = self.vector_width(layout, view.dtype, contiguous)
        T = ctype(view.dtype)
        last = len(view.starts) - 1
        for g in range(0, V, vec):
            slots = list(range(g, g + vec))
            if kind == "store" and not all(keep[v] for v in slots):
                slots = [v for v in slots if keep[v]]
                vec_ok = False
            else:
                vec_ok = vec > 1
            conds = []
            if vec_ok:
                first, lastv = slots[0], slots[-1]
                conds = [
                    inb(first),
                    f"(unsigned)({idx(last, lastv)}) < (unsigned)({dims[last]})",
                    f"tp_aligned({ptr} + {off(first)}, {vec * view.dtype.bytes})",
                ]
                conds += [ms[v] for v in slots if v in ms]
                if cond:
                    conds.insert(0, f"({cond})")
                em.open(f"if ({' && '.join(conds)})")
                self._vector_move(em, kind, T, vec, f"{ptr} + {off(first)}", arr, slots)
                em.close()
                em.open("else")
            for v in slots:
                c = [inb(v)] + ([ms[v]] if v in ms else [])
                if kind == "load":
                    em(f"{arr}[{v}] = ({' && '.join(c)}) ? {ptr}[{off(v)}] : {other};")
                else:
                    if cond:
                        c.insert(0, f"({cond})")
                    em(f"if ({' && '.join(c)}) {ptr}[{off(v)}] = {arr}[{v}];")
            if vec_ok:
                em.close()

    def _vector_move(self, em, kind: str, T: str, vec: int, addr: str, arr: str, slots, store_guard: str = ""):
        """One vector access of `vec` elements at `addr` for the value slots `slots` of register array `arr`: a
        load into them, or a store of them (behind `store_guard`, e.g. 'if (c) ')."""
        q = self.tmp("q")
        if kind == "load":
            em(f"const tp_pack<{T}, {vec}> {q} = tp_ldvec<{T}, {vec}>({addr});")
            for k, v in enumerate(slots):
                em(f"{arr}[{v}] = {q}.v[{k}];")
            return
        em(f"tp_pack<{T}, {vec}> {q};")
        for k, v in enumerate(slots):
            em(f"{q}.v[{k}] = {arr}[{v}];")
        em(f"{store_guard}tp_stvec<{T}, {vec}>({addr}, {q});")

    @staticmethod
    def shared_vector_width(sref, coords, V: int) -> int:
        """Values per vector access of a shared tile: the widest vec (at most 16 bytes, dividing V) at which,
        in every thread, each group of vec consecutive value slots holds vec consecutive elements of the stage
        starting at a multiple of vec, the stage's base being aligned to vec elements. Decided at compile
        time from the layout's coordinate tables and the shared layout (swizzle included); 1 if none."""
        eb = sref.dtype.bytes
        if not coords or V < 2 or eb > 16:
            return 1
        try:
            off = np.asarray(sref.stype.offset([c.arr for c in coords]), dtype=np.int64)
        except (ValueError, TypeError):
            return 1
        if off.ndim != 2 or off.shape[1] != V:
            return 1
        vec = 1
        while vec * 2 * eb <= 16 and V % (vec * 2) == 0 and sref.align % (vec * 2 * eb) == 0:
            vec *= 2
        while vec > 1:
            g = off.reshape(off.shape[0], V // vec, vec)
            if np.array_equal(g - g[:, :, :1], np.broadcast_to(np.arange(vec), g.shape)) \
                    and not (g[:, :, 0] % vec).any():
                return vec
            vec //= 2
        return 1

    def _bank_turn(self, sref, coords, V: int, vec: int):
        """(bit, d) where a register tile's vector stores into shared memory are bank conflicts that a per-lane
        order of the stores removes: the lanes whose lane-id bit `bit` is set store value group g ^ d where the
        others store g (each lane still stores every group once; only which group goes out in which
        instruction changes). Chosen at compile time from the layouts' address tables (NVIDIA's banks: 32 of 4
        bytes, a warp's 8-byte accesses in half-warp phases, 16-byte ones in quarter-warp phases) as the turn
        with the fewest shared-memory wavefronts, kept only if that is fewer than in-order; None otherwise.
        Where it pays: wgmma's f32 accumulator pairs into 128-byte swizzled rows (the large class's f32 pieces),
        where two rows of a half-warp share a 16-byte chunk in order (2-way) and every bank once turned."""
        eb = sref.dtype.bytes
        role = self.ctx.role
        if os.environ.get(BANK_TURN_ENV, "1") == "0":        # the in-order stores (an ablation switch)
            return None
        if vec < 2 or self.t.warp_size != 32 or (role is not None and role[0] % 32):
            return None
        groups = V // vec
        try:
            off = np.asarray(sref.stype.offset([c.arr for c in coords]), dtype=np.int64) * eb
        except (ValueError, TypeError):
            return None
        if off.ndim != 2 or off.shape[0] % 32 or off.shape[1] != V:
            return None
        return bank_turn(off[:, ::vec].reshape(-1, 32, groups), vec * eb)

    def _turned_stores(self, sref, coords, V: int, vec: int, arr: str, turn):
        """The stores of `_bank_turn`: group g from the lanes with bit `bit` clear, group g ^ d from the others
        (the values and the tile coordinates' constant parts picked by a select on the lane)."""
        em = self.em
        bit, d = turn
        T = ctype(sref.dtype)
        p = self.tmp("p")
        em(f"const bool {p} = (tp_lane >> {bit}) & 1;")
        for g in range(0, V, vec):
            h = (g // vec ^ d) * vec
            parts = []
            for c in coords:
                a, b = c.vals[g], c.vals[h]
                k = Const(a) if a == b else var(self.tmp("k"))
                if a != b:
                    em(f"const int {k.name} = {p} ? {b} : {a};")
                parts.append(k if c.tname is None else var(c.tname) + k)
            off = sym_c(sref.stype.offset(parts))
            q = self.tmp("q")
            em(f"tp_pack<{T}, {vec}> {q};")
            for j in range(vec):
                em(f"{q}.v[{j}] = {p} ? {arr}[{h + j}] : {arr}[{g + j}];")
            em(f"tp_stvec<{T}, {vec}>({sref.ptr} + {off}, {q});")

    def shared_access(self, sref, layout, coords, mask, kind, arr, other=None):
        em = self.em
        V = layout.num_values
        cond, keep = self.owner(layout) if kind == "store" else (None, [True] * V)
        ms = {}
        if mask is not None:
            fm, md = mask
            for v in range(V):
                ms[v] = self.tmp("m")
                em(f"const bool {ms[v]} = {cast(fm(v), md, dt.bool_)};")
        # groups of value slots that are consecutive, aligned elements of the stage in every thread (proved
        # here, from the layouts) move as one vector access when none of them is masked or skipped
        vec = self.shared_vector_width(sref, coords, V)
        done = set()
        T = ctype(sref.dtype)
        turn = self._bank_turn(sref, coords, V, vec) if kind == "store" and not ms and not cond and all(keep) \
            else None
        if turn is not None:
            self._turned_stores(sref, coords, V, vec, arr, turn)
            done.update(range(V))
        for g in range(0, V if vec > 1 and turn is None else 0, vec):
            slots = range(g, g + vec)
            if any(v in ms or not keep[v] for v in slots):
                continue
            off = sym_c(sref.stype.offset([c.sym(g) for c in coords]))
            self._vector_move(em, kind, T, vec, f"{sref.ptr} + {off}", arr, slots, f"if ({cond}) " if cond else "")
            done.update(slots)
        for v in range(V):
            if not keep[v] or v in done:
                continue
            off = sym_c(sref.stype.offset([c.sym(v) for c in coords]))
            c = ([f"({cond})"] if cond and kind == "store" else []) + ([ms[v]] if v in ms else [])
            if kind == "load":
                text = f"{sref.ptr}[{off}]"
                em(f"{arr}[{v}] = ({' && '.join(c)}) ? {text} : {other};" if c else f"{arr}[{v}] = {text};")
            else:
                em((f"if ({' && '.join(c)}) " if c else "") + f"{sref.ptr}[{off}] = {arr}[{v}];")
        if kind == "store" and self.t.fence_after_shared_store:
            em(self.t.proxy_fence)

    # ------------------------------------------------------------------ reductions
    def emit_reduce(self, e: ir.Call, dst: TileRef):
        x = self.operand_ref(e.args[0])
        L = x.layout
        axis = e.attrs["axis"]
        rank = len(x.shape)
        red_v = [i for i, s in enumerate(L.strides[axis][1]) if s]
        red_t = [i for i, s in enumerate(L.strides[axis][0]) if s]
        for kind, modes in (("value", red_v), ("thread", red_t)):
            for i in modes:
                if any(L.strides[d][1 if kind == "value" else 0][i] for d in range(rank) if d != axis):
                    raise self.error(
                        f"cannot reduce layout {L} along axis {axis}: a {kind} mode moves along "
                        "several dimensions at once",
                        "convert_layout to a blocked layout first",
                    )
        ct_dtype = dt.f32 if is_half(x.dtype) else x.dtype   # 16-bit floats and e4m3 reduce in f32
        ct = compute_type(x.dtype)
        comb = {
            "sum": "({a} + {b})",
            "max_reduce": "tp_maximum({a}, {b})",
            "min_reduce": "tp_minimum({a}, {b})",
            "prod": "({a} * {b})",
        }[e.op]
        groups: dict = {}
        for v in range(L.num_values):
            idx = _colex(v, L.value_shape)
            key = tuple(k for i, k in enumerate(idx) if i not in red_v)
            groups.setdefault(key, []).append(v)
        keys = list(groups)
        r = self.tmp("r")
        em = self.em
        em.open()
        em(f"{ct} {r}[{len(keys)}];")
        for k, key in enumerate(keys):
            vs = groups[key]
            acc = cast(f"{x.name}[{vs[0]}]", x.dtype, ct_dtype)
            em(f"{r}[{k}] = {acc};")
            for v in vs[1:]:
                em(f"{r}[{k}] = {comb.format(a=f'{r}[{k}]', b=cast(f'{x.name}[{v}]', x.dtype, ct_dtype))};")
        masks = []
        p = 1
        for i, n in enumerate(L.thread_shape):
            if i in red_t and n > 1:        # (a mode of one thread holds nothing to combine, at any stride)
                if not (_is_pow2(n) and _is_pow2(p)):
                    raise self.error(
                        f"reduction across a thread mode of size {n} at stride {p}: only powers of "
                        "two are supported",
                        "use a power-of-two number of threads along the axis",
                    )
                masks += [p << j for j in range(n.bit_length() - 1)]
            p *= n
        W = self.t.warp_size
        for m in (m for m in masks if m < W):
            for k in range(len(keys)):
                other = self.t.shuffle_xor.format(v=f"{r}[{k}]", m=m, w=W)
                em(f"{r}[{k}] = {comb.format(a=f'{r}[{k}]', b=other)};")
        warp_masks = [m // W for m in masks if m >= W]
        if warp_masks:
            self.need_uniform("a reduction across warps")
            K = len(keys)
            off = self.scratch(self.num_warps * W * K * max(ct_dtype.bytes, 4), 16)
            buf = f"(({ct}*)(tp_smem + {off}))"
            if self.ctx.loop_depth:
                self.barrier()  # an earlier run of this statement (in a loop) may still read the scratch
            for k in range(K):
                em(f"{buf}[tp_tid * {K} + {k}] = {r}[{k}];")
            self.barrier()
            rw = 0
            for m in warp_masks:
                rw |= m
            combos = [
                sum(b for b, on in zip(warp_masks, bits) if on)
                for bits in cartesian((0, 1), repeat=len(warp_masks))
            ]
            for k in range(K):
                reads = [f"{buf}[(((tp_warp & ~{rw}) | {c}) * {W} + tp_lane) * {K} + {k}]" for c in combos]
                em(f"{r}[{k}] = {reads[0]};")
                for rd in reads[1:]:
                    em(f"{r}[{k}] = {comb.format(a=f'{r}[{k}]', b=rd)};")
        for v in range(dst.layout.num_values):
            idx = _colex(v, L.value_shape)
            key = tuple(k for i, k in enumerate(idx) if i not in red_v)
            em(f"{dst.name}[{v}] = {cast(f'{r}[{keys.index(key)}]', ct_dtype, dst.dtype)};")
        em.close()

    # ------------------------------------------------------------------ mma
    def emit_mma(self, e: ir.Call, dst: TileRef):
        instr = e.attrs["instr"]
        emitter = self.t.mma.get(instr.family)
        if emitter is None:
            raise self.error(f"{instr.name} has no rendering", self.t.hint("mma"))
        a, b, acc = e.args
        ops = []
        for x in (a, b):
            if isinstance(x.type, SharedType):
                ops.append(self.smem_ref(x))
            else:
                ops.append(self.operand_ref(x))
        acc_ref = self.operand_ref(acc)
        if acc_ref.name != dst.name:
            self.copy_tile(acc_ref, dst)
        emitter(self, e, dst, ops[0], ops[1])
