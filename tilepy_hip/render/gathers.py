"""Gather loads, scatter stores and atomics: element-by-element global accesses whose addresses come from
index tiles (gather views, strided windows) or from a window's coordinates (atomics on windows).

Each value slot v of the register tile computes its tensor index per dimension (an index tile's value at the
slot's coordinates, through `plan`, or a window's start plus the coordinate), masks it at the tensor's bounds
like a window does, and reads, writes or atomically updates that one element. The atomic's C function comes
from the target's table (`RenderTarget.atomics`); memory-ordering fences from `RenderTarget.fence`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tilepy import dtypes as dt
from tilepy import ir
from tilepy.ops import ATOMICS
from tilepy.types import GatherTileType, RegType, ScalarType

from .cexpr import cast, ctype
from .tiles import Coord, TileRef

# what the renderer knows at compile time of an index (`GatherOps._static_index`, `_coord_fact`)
EXACT, UNIFORM, CODES = "exact", "uniform", "codes"


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

    def _index_fns(self, view, coords, shape, facts=None):
        """(tensor, [fn(v) -> (C text, dtype) per tensor dimension]) of a gather view or window at `coords`.
        `facts` (a list, filled when given): per tensor dimension what is known at compile time of its index
        (`_static_index`): a [threads, values] table of the index and whether a uniform run-time addend is
        left out of it, or None where nothing is known."""
        if isinstance(view.type, GatherTileType):
            if isinstance(view, ir.Var):
                g = self.env.get(view.name)
                if not isinstance(g, GatherRef):
                    raise self.error(f"`{view.name}` is not a gather view here")
                fns = []
                for item in g.index:
                    if isinstance(item, TileRef):
                        c = self._bcast_to(coords, shape, item.shape)
                        f = self.leaf(item, c)
                        fns.append(lambda v, f=f, d=item.dtype: (f(v), d))
                        if facts is not None:   # equal coordinates of the index tile: the same index
                            facts.append(self._coord_fact(c, item.shape))
                    else:
                        fns.append(lambda v, item=item: item)
                        if facts is not None:
                            facts.append((np.zeros_like(coords[0].arr), UNIFORM))
                return g.tensor, fns
            fns = []
            for a in view.args[1:]:
                c = self._bcast(coords, shape, a) if isinstance(a.type, RegType) else coords
                if facts is not None:   # the index's values, else (a tile) which slots share one
                    fact = self._static_index(a, c if isinstance(a.type, RegType) else coords)
                    if fact is None and isinstance(a.type, RegType):
                        fact = self._coord_fact(c, a.type.shape)
                    facts.append(fact)
                f, d = self.plan(a, c)
                fns.append(lambda v, f=f, d=d: (f(v), d))
            return self.env[view.args[0].name], fns
        ref = self.view_ref(view)  # a window: start + coordinate on each kept dimension
        tdims = ref.tile_dims
        fns = []
        for j, start in enumerate(ref.starts):
            if j in tdims:
                c = coords[tdims.index(j)]
                fns.append(lambda v, s=start, c=c: (f"({s} + {c.c(v)})", dt.i32))
                if facts is not None:
                    facts.append((np.asarray(c.arr, dtype=np.int64), UNIFORM))
            else:
                fns.append(lambda v, s=start: (f"({s})", dt.i32))
                if facts is not None:
                    facts.append((np.zeros_like(coords[0].arr), UNIFORM))
        return ref.tensor, fns

    @staticmethod
    def _coord_fact(coords, shape):
        """An index tile's values are a function of its coordinates: slots whose coordinates are equal in every
        thread hold the same index (the table holds the coordinates' row-major code: equality only)."""
        if not coords:
            return None
        codes = np.ravel_multi_index(tuple(np.asarray(c.arr, dtype=np.int64) for c in coords), tuple(shape))
        return np.asarray(codes, dtype=np.int64), CODES

    # ops whose integer value the renderer can compute at compile time from the tile coordinates
    _STATIC_BINOPS = {"+": np.add, "-": np.subtract, "*": np.multiply, "//": np.floor_divide, "%": np.mod,
                      "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
                      "==": np.equal, "!=": np.not_equal, "&": np.bitwise_and, "|": np.bitwise_or,
                      "and": np.logical_and, "or": np.logical_or}

    def _static_index(self, e, coords, depth=0):
        """(table, kind) for an integer index expression at `coords`: table[t, v] is its value in thread t at
        value slot v (kind EXACT), or that up to a uniform run-time addend, the same in every thread and slot
        (kind UNIFORM: `n0 + tp.arange(B)`); None when the value is not known at compile time (loaded from
        memory, floats, a run-time scalar anywhere but added). Mirrors `plan`, with Python's // and % as the
        kernels' (tp_floordiv, tp_mod).

        Memoized per top-level call on (expression, coordinates): an index built as a chain of steps that each
        read earlier steps more than once (a binary search written out: `lo = where(c, mid + 1, lo)`,
        `mid = (lo + hi) // 2`, ...) is a DAG whose tree walk is exponential in its length."""
        if depth == 0:
            memo, self._static_memo = getattr(self, "_static_memo", None), {}
            try:
                return self._static_index(e, coords, 1)
            finally:
                self._static_memo = memo
        if depth > 64 or not coords:
            return None
        key = (id(e), tuple((c.tname, c.arr.shape, np.asarray(c.arr).tobytes()) for c in coords))
        memo = self._static_memo
        if key in memo:
            return memo[key][1]
        got = self._static_index_uncached(e, coords, depth)
        memo[key] = (e, got)    # e kept alive: a rematerialized expression's id is not reused while the memo is
        return got

    def _static_index_uncached(self, e, coords, depth):
        T, V = np.asarray(coords[0].arr).shape
        t = getattr(e, "type", None)
        if isinstance(e, ir.Const):
            if not isinstance(e.value, (bool, int, np.integer)):
                return None
            return np.full((T, V), int(e.value), dtype=np.int64), EXACT
        if not isinstance(t, RegType):
            ok = isinstance(t, ScalarType) and t.uniform and not t.dtype.is_float
            return (np.zeros((T, V), dtype=np.int64), UNIFORM) if ok else None
        if t.dtype.is_float:
            return None

        def sub(x):
            return self._static_index(x, self._bcast(coords, t.shape, x) or coords, depth + 1)

        out = None
        if isinstance(e, ir.Var):
            again = self.rematerialize(e.name)
            out = self._static_index(again, coords, depth + 1) if again is not None else None
        elif isinstance(e, ir.BinOp):
            fn = self._STATIC_BINOPS.get(e.op)
            a = sub(e.lhs) if fn is not None else None
            b = sub(e.rhs) if a is not None else None
            if b is None:
                return None
            if a[1] == UNIFORM or b[1] == UNIFORM:   # a uniform addend survives + and -, and * by a constant
                if e.op in ("+", "-") and not (e.op == "-" and b[1] == UNIFORM):
                    out = fn(a[0], b[0]), UNIFORM
                elif e.op == "*" and isinstance(e.rhs, ir.Const) and a[1] == UNIFORM:
                    out = a[0] * b[0], UNIFORM
                elif e.op == "*" and isinstance(e.lhs, ir.Const) and b[1] == UNIFORM:
                    out = a[0] * b[0], UNIFORM
                else:
                    return None
            else:
                if e.op in ("//", "%") and not b[0].all():
                    return None
                out = np.asarray(fn(a[0], b[0])).astype(np.int64), EXACT
        elif isinstance(e, ir.UnOp) and e.op == "-":
            a = sub(e.operand)
            out = None if a is None or a[1] != EXACT else (-a[0], EXACT)
        elif isinstance(e, ir.Call):
            op = e.op
            if op == "arange":
                out = np.asarray(coords[0].arr, dtype=np.int64), EXACT
            elif op == "expand_dims":
                axis = e.attrs["axis"]
                return self._static_index(e.args[0], coords[:axis] + coords[axis + 1:], depth + 1)
            elif op == "permute":
                dims = e.attrs["dims"]
                return self._static_index(e.args[0], [coords[dims.index(d)] for d in range(len(dims))], depth + 1)
            elif op == "tile_window":
                return self._static_index(e.args[0], [Coord(c.tname, [k + a for k in c.vals], c.arr + a) if a else c
                                                      for c, a in zip(coords, e.attrs["starts"])], depth + 1)
            elif op == "cast":
                a = sub(e.args[0])
                out = a if a is not None and not e.attrs["dtype"].is_float else None
            elif op in ("where", "maximum", "minimum"):
                subs = []
                for x in e.args[:3 if op == "where" else 2]:
                    subs.append(sub(x))
                    if subs[-1] is None or subs[-1][1] != EXACT:
                        return None
                if op == "where":
                    out = np.where(subs[0][0] != 0, subs[1][0], subs[2][0]), EXACT
                else:
                    out = (np.maximum if op == "maximum" else np.minimum)(subs[0][0], subs[1][0]), EXACT
            elif op == "zeros":
                out = np.zeros((T, V), dtype=np.int64), EXACT
        if out is None:
            return None
        table = np.broadcast_to(np.asarray(out[0], dtype=np.int64), (T, V))
        if table.size and np.abs(table).max() >= 2 ** 30:   # past what the kernels' 32-bit arithmetic holds
            return None
        return table, out[1]

    @staticmethod
    def _bcast_to(coords, shape, have):
        return [c if n == m else Coord(None, [0] * len(c.vals), 0 * c.arr) for c, n, m in zip(coords, have, shape)]

    def element_access(self, view, layout, coords, shape, mask, kind, arr, other=None, values=None, sem="relaxed",
                       result=True, fence_after=None):
        """One global element per value slot. kind: "load" (arr[v] = element or other), "store" (element =
        arr[v]), or an atomic op (arr[v] = old value; `values` are the operands' arrays)."""
        em = self.em
        facts: list = []
        tensor, fns = self._index_fns(view, coords, shape, facts if kind == "load" else None)
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
        if kind == "load":
            self._gather_load(tensor, fns, facts, coords, layout, ms, strides, arr, other)
            return
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
            if cond:
                c.insert(0, f"({cond})")
            ok = " && ".join(c)
            zero = cast("0", dt.i32, tensor.dtype)
            addr = f"{tensor.ptr}[{' + '.join(f'{i} * {s}' for i, s in zip(idx, strides))}]"
            if kind == "store":
                em(f"if ({ok}) {addr} = {arr}[{v}];")
            else:
                fn = self.t.atomics[kind]
                args = ", ".join(f"{a}[{v}]" for a in values)
                call = f"{fn}(&{addr}, {args})"
                em(f"{arr}[{v}] = ({ok}) ? {call} : {zero};" if result else f"if ({ok}) (void){call};")
        if fence_after:  # the updating threads' acquire fence, before the exchange's barrier
            em(fence_after)
        if replicated:
            self.exchange(TileRef(arr, tensor.dtype, tuple(shape), layout), coords, final)

    # ------------------------------------------------------------------ loads and stores through gathers
    def emit_gather_load(self, e: ir.Call, dst: TileRef, coords, mask, other):
        self.element_access(e.args[0], dst.layout, coords, dst.shape, mask, "load", dst.name, other)

    def emit_gather_store(self, call: ir.Call, layout, coords, shape, mask, vals):
        self.element_access(call.args[0], layout, coords, shape, mask, "store", vals)

    def _gather_load(self, tensor, fns, facts, coords, layout, ms, strides, arr, other):
        """arr[v] = the gathered element at value slot v (or `other` where out of bounds or masked), with what
        the layouts and index expressions prove at compile time:
        * slots holding the same tile element in every thread (a broadcast axis) are loaded once and copied;
        * a group of slots whose indices are known up to a uniform addend (`_static_index`: arange, constants,
          uniform scalars, where / // / % of them) and whose last-dimension offsets from the group's first are
          the same in every thread and cover 0..m-1 (m a power of two, at most 16 bytes) is one m-element
          vector load, checked at run time only for bounds (the first element, and the last dimension's
          first + m - 1), alignment and the slots' masks (a masked slot: the element loads); each slot takes its
          element (`q.v[rel]`). Consecutive
          columns are m = the group; GPT-J's cos[j // 2] are pairs of one element (m = half the group);
          a group proved not to fit is loaded element by element, with no run-time test;
        * where the indices are not known (loaded from memory), a group of the layout's 16-byte vector along
          the last dimension is one vector load when, at run time, its offsets are consecutive, in bounds,
          unmasked and the first is aligned (a row gather X[idx[:, None], cols[None, :]] of loaded rows);
          element loads otherwise."""
        em, ptr, T = self.em, tensor.ptr, ctype(tensor.dtype)
        V, nd, eb = layout.num_values, len(tensor.dims), tensor.dtype.bytes
        last = nd - 1
        dup, seen = {}, {}
        for v in range(V):
            key = b"".join(np.ascontiguousarray(np.asarray(c.arr)[:, v]).tobytes() for c in coords)
            if key in seen:
                dup[v] = seen[key]
            else:
                seen[key] = v
        names: dict = {}

        def index(v):
            """(index C names per dimension, in-bounds C text, in-bounds-and-mask C text, flat offset name)"""
            if v not in names:
                idx = []
                for f in fns:
                    text, _ = f(v)
                    name = self.tmp("gi")
                    em(f"const long long {name} = (long long)({text});")
                    idx.append(name)
                inb = " && ".join(f"(unsigned long long){i} < (unsigned long long)({n})"
                                  for i, n in zip(idx, tensor.dims))
                o = self.tmp("go")
                em(f"const long long {o} = {' + '.join(f'{i} * {s}' for i, s in zip(idx, strides))};")
                names[v] = (idx, inb, " && ".join([inb] + ([ms[v]] if v in ms else [])), o)
            return names[v]

        def element(v):
            if v in dup:
                em(f"{arr}[{v}] = {arr}[{dup[v]}];")
                return
            _, _, ok, o = index(v)
            em(f"{arr}[{v}] = ({ok}) ? {ptr}[{o}] : {other};")

        def pattern(v0, n):
            """The last-dimension offsets of slots v0..v0 + n - 1 from v0's, when every other index is equal
            across them and the offsets are the same in every thread; None when that is not known here."""
            if len(facts) != nd:
                return None
            sl = slice(v0, v0 + n)
            for j in range(nd):
                if facts[j] is None:
                    return None
                tab, kind = facts[j]
                d = tab[:, sl] - tab[:, v0:v0 + 1]
                if (j != last or kind == CODES) and d.any():
                    return None
                if j == last and (d != d[:1]).any():
                    return None
            return [int(r) for r in facts[last][0][0, sl] - facts[last][0][0, v0]]

        def fits(rel):
            m = max(rel) + 1
            return min(rel) == 0 and sorted(set(rel)) == list(range(m)) and not m & (m - 1) and m * eb <= 16

        vec = self.vector_width(layout, tensor.dtype, True)
        v0 = 0
        while v0 < V:
            n, rel = V, None
            while n > 1:
                if v0 % n == 0 and v0 + n <= V and not all(v in dup for v in range(v0, v0 + n)):
                    rel = pattern(v0, n)
                    if rel is not None and fits(rel):
                        break
                rel = None
                n //= 2
            if rel is None:
                if vec > 1 and v0 % vec == 0 and v0 + vec <= V and pattern(v0, vec) is None \
                        and not all(v in dup for v in range(v0, v0 + vec)):
                    # not known here (indices loaded from memory): the run-time test of the layout's vector
                    self._vector_gather([(v, index(v)[2], index(v)[3]) for v in range(v0, v0 + vec)],
                                        tensor, arr, other)
                    v0 += vec
                else:                            # one slot, or a copy of an earlier one
                    element(v0)
                    v0 += 1
                continue
            m = max(rel) + 1
            idx, inb, _, o = index(v0)
            if m == 1:                            # the same element in every slot of the group
                raw = self.tmp("gv")
                em(f"const {T} {raw} = ({inb}) ? {ptr}[{o}] : {other};")
                for v in range(v0, v0 + n):
                    em(f"{arr}[{v}] = {f'({ms[v]}) ? {raw} : {other}' if v in ms else raw};")
            else:
                conds = [inb, f"(unsigned long long)({idx[last]} + {m - 1}) < (unsigned long long)"
                              f"({tensor.dims[last]})", f"tp_aligned({ptr} + {o}, {m * eb})"]
                conds += [ms[v] for v in range(v0, v0 + n) if v in ms]   # masked slots: the element loads
                em.open(f"if ({' && '.join(conds)})")
                q = self.tmp("q")
                em(f"const tp_pack<{T}, {m}> {q} = tp_ldvec<{T}, {m}>({ptr} + {o});")
                for k, v in enumerate(range(v0, v0 + n)):
                    em(f"{arr}[{v}] = {q}.v[{rel[k]}];")
                em.close()
                em.open("else")
                for v in range(v0, v0 + n):
                    element(v)
                em.close()
            v0 += n

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
