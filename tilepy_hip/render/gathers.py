"""Gather loads, scatter stores and atomics: element-by-element global accesses whose addresses come from
index tiles (gather views, strided windows) or from a window's coordinates (atomics on windows).

Each value slot v of the register tile computes its tensor index per dimension (an index tile's value at the
slot's coordinates, through `plan`, or a window's start plus the coordinate), masks it at the tensor's bounds
like a window does, and reads, writes or atomically updates that one element. The atomic's C function comes
from the target's table (`RenderTarget.atomics`); memory-ordering fences from `RenderTarget.fence`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilepy import dtypes as dt
from tilepy import ir
from tilepy.ops import ATOMICS
from tilepy.types import GatherTileType, RegType

from .cexpr import cast, ctype
from .tiles import Coord, TileRef


@dataclass
class GatherRef:
    """A gather view bound to a variable: per tensor dimension a materialized index tile or a scalar."""

    tensor: object  # refs.TensorRef
    index: list  # TileRef | (C text, dtype)
    shape: tuple


class GatherOps:
    # ------------------------------------------------------------------ views
    def assign_gather(self, s: ir.Assign):
        """`g = X[idx...]`: the index tiles are computed now (as the view captures them) and kept in arrays."""
        call = s.value
        if not (isinstance(call, ir.Call) and call.op == "gather_view"):
            raise self.error("a gather view can only be assigned from X[idx, ...]")
        index = []
        for a in call.args[1:]:
            if isinstance(a.type, RegType):
                ref = self.operand_ref(a)
                keep = self.new_tile(a.type)
                self.copy_tile(ref, keep)
                index.append(keep)
            else:
                text, d = self.scalar(a)
                name = self.tmp("gs")
                self.em(f"const {ctype(d)} {name} = {text};")
                index.append((name, d))
        self.env[s.name] = GatherRef(self.env[call.args[0].name], index, tuple(call.type.shape))

    def _index_fns(self, view, coords, shape):
        """(tensor, [fn(v) -> (C text, dtype) per tensor dimension]) of a gather view or window at `coords`."""
        if isinstance(view.type, GatherTileType):
            if isinstance(view, ir.Var):
                g = self.env.get(view.name)
                if not isinstance(g, GatherRef):
                    raise self.error(f"`{view.name}` is not a gather view here")
                fns = []
                for item in g.index:
                    if isinstance(item, TileRef):
                        f = self.leaf(item, self._bcast_to(coords, shape, item.shape))
                        fns.append(lambda v, f=f, d=item.dtype: (f(v), d))
                    else:
                        fns.append(lambda v, item=item: item)
                return g.tensor, fns
            fns = []
            for a in view.args[1:]:
                f, d = self.plan(a, self._bcast(coords, shape, a) if isinstance(a.type, RegType) else coords)
                fns.append(lambda v, f=f, d=d: (f(v), d))
            return self.env[view.args[0].name], fns
        ref = self.view_ref(view)  # a window: start + coordinate on each kept dimension
        tdims = ref.tile_dims
        fns = []
        for j, start in enumerate(ref.starts):
            if j in tdims:
                c = coords[tdims.index(j)]
                fns.append(lambda v, s=start, c=c: (f"({s} + {c.c(v)})", dt.i32))
            else:
                fns.append(lambda v, s=start: (f"({s})", dt.i32))
        return ref.tensor, fns

    @staticmethod
    def _bcast_to(coords, shape, have):
        return [c if n == m else Coord(None, [0] * len(c.vals), 0 * c.arr) for c, n, m in zip(coords, have, shape)]

    def element_access(self, view, layout, coords, shape, mask, kind, arr, other=None, values=None, sem="relaxed",
                       result=True, fence_after=None):
        """One global element per value slot. kind: "load" (arr[v] = element or other), "store" (element =
        arr[v]), or an atomic op (arr[v] = old value; `values` are the operands' arrays)."""
        em = self.em
        tensor, fns = self._index_fns(view, coords, shape)
        V = layout.num_values
        cond, keep = self.owner(layout) if kind != "load" else (None, [True] * V)
        replicated = kind in ATOMICS and result and (cond or not all(keep))
        if replicated:  # the owner updates each element; the other holders get its old value afterwards
            final, arr = arr, self.tmp("ao")
            em(f"{ctype(tensor.dtype)} {arr}[{V}];")
        strides = []
        for j in range(len(tensor.dims)):
            rest = tensor.dims[j + 1:]
            s = self.tmp("gst")
            em(f"const long long {s} = {' * '.join(f'(long long){d}' for d in rest) if rest else '1LL'};")
            strides.append(s)
        ms = {}
        if mask is not None:
            fm, md = mask
            for v in range(V):
                ms[v] = self.tmp("m")
                em(f"const bool {ms[v]} = {cast(fm(v), md, dt.bool_)};")
        # a load whose value slots run along the tile's last dimension in groups of `vec` (the layout's 16-byte
        # vectors) reads a group with one vector load when, at run time, its elements are consecutive in memory,
        # in bounds, unmasked and the first is aligned (a row gather X[idx[:, None], cols[None, :]], a flat
        # gather of whole rows); otherwise element by element as below
        vec = self.vector_width(layout, tensor.dtype, True) if kind == "load" else 1
        group: list = []
        for v in range(V):
            if not keep[v]:
                continue
            idx = []
            for f in fns:
                text, d = f(v)
                name = self.tmp("gi")
                em(f"const long long {name} = (long long)({text});")
                idx.append(name)
            c = [f"(unsigned long long){i} < (unsigned long long)({n})" for i, n in zip(idx, tensor.dims)]
            c += [ms[v]] if v in ms else []
            if cond and kind != "load":
                c.insert(0, f"({cond})")
            ok = " && ".join(c)
            zero = cast("0", dt.i32, tensor.dtype)
            flat = " + ".join(f"{i} * {s}" for i, s in zip(idx, strides))
            addr = f"{tensor.ptr}[{flat}]"
            if kind == "load" and vec > 1:
                o = self.tmp("go")
                em(f"const long long {o} = {flat};")
                group.append((v, ok, o))
                if len(group) == vec:
                    self._vector_gather(group, tensor, arr, other)
                    group = []
                continue
            if kind == "load":
                em(f"{arr}[{v}] = ({ok}) ? {addr} : {other};")
            elif kind == "store":
                em(f"if ({ok}) {addr} = {arr}[{v}];")
            else:
                fn = self.t.atomics[kind]
                args = ", ".join(f"{a}[{v}]" for a in values)
                call = f"{fn}(&{addr}, {args})"
                em(f"{arr}[{v}] = ({ok}) ? {call} : {zero};" if result else f"if ({ok}) (void){call};")
        if group:   # (vector_width divides the slots: never left over; kept element-wise if it were)
            for v, ok, o in group:
                em(f"{arr}[{v}] = ({ok}) ? {tensor.ptr}[{o}] : {other};")
        if fence_after:  # the updating threads' acquire fence, before the exchange's barrier
            em(fence_after)
        if replicated:
            self.exchange(TileRef(arr, tensor.dtype, tuple(shape), layout), coords, final)

    # ------------------------------------------------------------------ loads and stores through gathers
    def emit_gather_load(self, e: ir.Call, dst: TileRef, coords, mask, other):
        self.element_access(e.args[0], dst.layout, coords, dst.shape, mask, "load", dst.name, other)

    def emit_gather_store(self, call: ir.Call, layout, coords, shape, mask, vals):
        self.element_access(call.args[0], layout, coords, shape, mask, "store", vals)

    def _vector_gather(self, group, tensor, arr, other):
        """One group of consecutive value slots [(slot, in-bounds-and-mask C text, flat offset name)]: a vector
        load where the offsets are consecutive and the first is aligned, element loads otherwise."""
        em, ptr, n = self.em, tensor.ptr, len(group)
        first = group[0][2]
        conds = [f"({ok})" for _, ok, _ in group]
        conds += [f"{o} == {first} + {k}" for k, (_, _, o) in enumerate(group) if k]
        conds.append(f"tp_aligned({ptr} + {first}, {n * tensor.dtype.bytes})")
        T = ctype(tensor.dtype)
        em.open(f"if ({' && '.join(conds)})")
        q = self.tmp("q")
        em(f"const tp_pack<{T}, {n}> {q} = tp_ldvec<{T}, {n}>({ptr} + {first});")
        for k, (v, _, _) in enumerate(group):
            em(f"{arr}[{v}] = {q}.v[{k}];")
        em.close()
        em.open("else")
        for v, ok, o in group:
            em(f"{arr}[{v}] = ({ok}) ? {ptr}[{o}] : {other};")
        em.close()

    # ------------------------------------------------------------------ atomics
    def emit_atomic(self, e: ir.Call, dst: TileRef | None):
        t: RegType = e.type
        coords = self.out_coords(t.layout)
        nvals = 2 if e.op == "atomic_cas" else 1
        self.em.open()
        arrays = []
        for a in e.args[1:1 + nvals]:
            f, d = self.plan(a, coords)
            name = self.tmp("av")
            self.em(f"{ctype(t.dtype)} {name}[{t.layout.num_values}];")
            for v in range(t.layout.num_values):
                self.em(f"{name}[{v}] = {cast(f(v), d, t.dtype)};")
            arrays.append(name)
        mask = None
        if e.attrs.get("masked"):
            m = e.args[1 + nvals]
            mask = self.plan(m, self._bcast(coords, t.shape, m))
        sem = e.attrs.get("sem", "relaxed")
        cond, keep = self.owner(t.layout)
        # fewer threads update than run the op (replicated elements: their lowest holders update them): the
        # updating threads alone fence (the fence of a release / acquire pattern), the others are ordered by
        # barriers over the threads running the op. Release: every thread's earlier writes, then the barrier,
        # then the owners' fence and update; acquire: the owners' update, their fence, then the barrier of the
        # old values' exchange (element_access) before any thread reads on (the CUTLASS semaphore's pattern).
        one = bool(cond or not all(keep))
        if sem in ("release", "acq_rel"):
            if one:
                self.sync_here("a release atomic on replicated elements")()
                self.em(f"if ({cond}) {{ {self.t.fence} }}" if cond else self.t.fence)
            else:
                self.em(self.t.fence)
        fence_after = None
        if sem in ("acquire", "acq_rel"):
            fence_after = (f"if ({cond}) {{ {self.t.fence} }}" if cond else self.t.fence) if one else None
        self.element_access(e.args[0], t.layout, coords, t.shape, mask, e.op, dst.name if dst else None,
                            values=arrays, sem=sem, result=dst is not None, fence_after=fence_after)
        if sem in ("acquire", "acq_rel") and not one:
            self.em(self.t.fence)
        elif fence_after and dst is None:   # no exchange of old values: a barrier of its own after the fence
            self.sync_here("an acquire atomic on replicated elements")()
        self.em.close()
