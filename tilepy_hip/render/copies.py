"""Cooperative tile copies between global views and shared tiles: the block's threads take consecutive chunks
of the tile's last dimension (16 bytes when the layouts allow), so global accesses coalesce.

Global -> shared runs asynchronously where the target has cp.async (the chunk's source size shrinks at the
tensor's edge, and the rest of the chunk is zero-filled), and synchronously through registers elsewhere
(AMD LDS staging). A run-time check that the addresses are aligned picks the vector path; otherwise every
element is copied on its own, with the same bounds handling.
"""

from __future__ import annotations

from tilepy import ir
from tilepy.symbolic import Const, Var
from tilepy.types import GlobalTileType, SharedType

from .cexpr import ctype, sym_c


class CopyOps:
    def emit_copy(self, call: ir.Call, async_: bool):
        src, dst = call.args
        saved = self.tid_name, self.num_threads
        if self.ctx.divergent:
            if self.ctx.role is None:
                raise self.error(
                    "a cooperative copy inside a thread-dependent branch whose threads are not a "
                    "static range",
                    "branch on warp or warpgroup ids, e.g. if tp.warpgroup_id() == 0",
                )
            lo, size = self.ctx.role
            self.tid_name = self.role_tid(lo, size)
            self.num_threads = size
        try:
            self._emit_copy(src, dst, async_)
        finally:
            self.tid_name, self.num_threads = saved

    def _emit_copy(self, src, dst, async_: bool):
        self.em.open()
        if isinstance(src.type, GlobalTileType) and isinstance(dst.type, SharedType):
            self.copy_g2s(self.view_ref(src), self.smem_ref(dst), async_)
        elif isinstance(src.type, SharedType) and isinstance(dst.type, GlobalTileType):
            self.copy_s2g(self.smem_ref(src), self.view_ref(dst))
        elif isinstance(src.type, SharedType) and isinstance(dst.type, SharedType):
            self.copy_s2s(self.smem_ref(src), self.smem_ref(dst))
        else:
            raise self.error(f"a copy from {src.type} to {dst.type} is not supported")
        self.em.close()
        if isinstance(dst.type, SharedType) and not async_ and self.t.fence_after_shared_store:
            self.em(self.t.proxy_fence)

    # ------------------------------------------------------------------ chunking
    def _smem_vec_ok(self, sref, vec: int) -> bool:
        st = sref.stype
        strides = st.layout.stride if isinstance(st.layout.stride, tuple) else (st.layout.stride,)
        shape = st.shape
        if len(strides) != len(shape) or strides[-1] != 1 or any(s % vec for s in strides[:-1]):
            return False
        if st.swizzle is not None and (1 << st.swizzle.base) % vec:
            return False
        return sref.align % (vec * st.dtype.bytes) == 0 or sref.align >= 16

    def _chunk_vec(self, shape, dtype, view, sref) -> int:
        contiguous = view is None or (view.tile_dims and view.tile_dims[-1] == len(view.starts) - 1)
        if not contiguous:
            return 1
        vec = 1
        while vec * 2 * dtype.bytes <= 16 and shape[-1] % (vec * 2) == 0 and self._smem_vec_ok(sref, vec * 2):
            vec *= 2
        return vec

    def _chunks(self, shape, vec):
        """Per iteration: (guard or None, tile coordinates as Syms of the chunk's first element)."""
        T = self.num_threads if self.tid_name != "0" else 1
        per_row = shape[-1] // vec
        chunks = per_row
        for n in shape[:-1]:
            chunks *= n
        out = []
        for it in range(-(-chunks // T)):
            c = (Var(self.tid_name) if self.tid_name != "0" else Const(0)) + it * T
            guard = f"{self.tid_name} + {it * T} < {chunks}" if (it + 1) * T > chunks else None
            coords, rem = [], c
            for d in range(len(shape) - 1, -1, -1):
                n = per_row if d == len(shape) - 1 else shape[d]
                k = rem % n if d > 0 else rem
                coords.append(k * vec if d == len(shape) - 1 else k)
                rem = rem // n
            out.append((guard, list(reversed(coords))))
        return out

    def _global_terms(self, view, coords):
        """(C index per tensor dimension, C element offset) for tile coordinates `coords` (Syms)."""
        tdims = view.tile_dims
        idx = []
        for j, start in enumerate(view.starts):
            if j in tdims:
                idx.append(f"({start} + {sym_c(coords[tdims.index(j)])})")
            else:
                idx.append(f"({start})")
        off = " + ".join(f"(long long){i} * {view.stride(j)}" for j, i in enumerate(idx))
        return idx, off

    def _uniform_ok(self, view, vec):
        """Run-time condition (the same in every thread) under which chunk addresses are vec-aligned."""
        eb = view.dtype.bytes
        conds = [f"tp_aligned({view.tensor.ptr}, {vec * eb})"]
        rank = len(view.starts)
        if rank > 1:
            conds.append(f"({view.tensor.dims[-1]}) % {vec} == 0")
        conds.append(f"tp_mod<int>({view.starts[-1]}, {vec}) == 0")
        return " && ".join(conds)

    # ------------------------------------------------------------------ global -> shared
    def copy_g2s(self, view, sref, async_: bool):
        em = self.em
        shape, dtype = sref.stype.shape, sref.dtype
        if tuple(shape) != tuple(s for s, q in zip(view.sizes, view.squeeze) if not q):
            raise self.error("copy between tiles of different shapes")
        vec = self._chunk_vec(shape, dtype, view, sref)
        eb = dtype.bytes
        if async_ and vec * eb not in (4, 8, 16):
            async_ = False
        T = ctype(dtype)
        ptr, dims = view.tensor.ptr, view.tensor.dims
        last = len(view.starts) - 1
        chunks = self._chunks(shape, vec)
        if vec > 1:
            em.open(f"if ({self._uniform_ok(view, vec)})")
            for guard, coords in chunks:
                if guard:
                    em.open(f"if ({guard})")
                idx, off = self._global_terms(view, coords)
                soff = sym_c(sref.stype.offset(coords))
                others = " && ".join(
                    f"(unsigned){i} < (unsigned)({dims[j]})" for j, i in enumerate(idx) if j != last
                )
                n = self.tmp("n")
                em(
                    f"const int {n} = {f'!({others}) ? 0 : ' if others else ''}"
                    f"tp_min<int>(tp_max<int>({dims[last]} - {idx[last]}, 0), {vec});"
                )
                if async_:
                    em(
                        f"tp_cp_async<{vec * eb}>(tp_smem_addr({sref.ptr} + {soff}), {n} > 0 ? (const void*)({ptr} + "
                        f"{off}) : (const void*){ptr}, {n} * {eb});"
                    )
                else:
                    em.open(f"if ({n} == {vec})")
                    em(f"tp_stvec<{T}, {vec}>({sref.ptr} + {soff}, tp_ldvec<{T}, {vec}>({ptr} + {off}));")
                    em.close()
                    em.open("else")
                    for k in range(vec):
                        em(f"{sref.ptr}[{soff} + {k}] = {k} < {n} ? {ptr}[{off} + {k}] : {T}(0);")
                    em.close()
                if guard:
                    em.close()
            em.close()
            em.open("else")
        self._copy_elements(view, sref, "g2s")
        if vec > 1:
            em.close()

    def _copy_elements(self, view, sref, direction: str):
        """The element-by-element fallback (unaligned addresses or odd widths)."""
        em = self.em
        shape = sref.stype.shape
        T = ctype(sref.dtype)
        ptr, dims = view.tensor.ptr, view.tensor.dims
        for guard, coords in self._chunks(shape, 1):
            if guard:
                em.open(f"if ({guard})")
            idx, off = self._global_terms(view, coords)
            soff = sym_c(sref.stype.offset(coords))
            inb = " && ".join(f"(unsigned){i} < (unsigned)({dims[j]})" for j, i in enumerate(idx))
            if direction == "g2s":
                em(f"{sref.ptr}[{soff}] = ({inb}) ? {ptr}[{off}] : {T}(0);")
            else:
                em(f"if ({inb}) {ptr}[{off}] = {sref.ptr}[{soff}];")
            if guard:
                em.close()

    # ------------------------------------------------------------------ shared -> global, shared -> shared
    def copy_s2g(self, sref, view):
        em = self.em
        shape, dtype = sref.stype.shape, sref.dtype
        vec = self._chunk_vec(shape, dtype, view, sref)
        T = ctype(dtype)
        ptr, dims = view.tensor.ptr, view.tensor.dims
        last = len(view.starts) - 1
        if vec > 1:
            em.open(f"if ({self._uniform_ok(view, vec)})")
            for guard, coords in self._chunks(shape, vec):
                if guard:
                    em.open(f"if ({guard})")
                idx, off = self._global_terms(view, coords)
                soff = sym_c(sref.stype.offset(coords))
                inb = " && ".join(
                    f"(unsigned){i} < (unsigned)({dims[j]})" for j, i in enumerate(idx) if j != last
                )
                n = self.tmp("n")
                em(
                    f"const int {n} = {f'!({inb}) ? 0 : ' if inb else ''}"
                    f"tp_min<int>(tp_max<int>({dims[last]} - {idx[last]}, 0), {vec});"
                )
                em.open(f"if ({n} == {vec})")
                em(f"tp_stvec<{T}, {vec}>({ptr} + {off}, tp_ldvec<{T}, {vec}>({sref.ptr} + {soff}));")
                em.close()
                em.open("else")
                for k in range(vec):
                    em(f"if ({k} < {n}) {ptr}[{off} + {k}] = {sref.ptr}[{soff} + {k}];")
                em.close()
                if guard:
                    em.close()
            em.close()
            em.open("else")
            self._store_rows_realigned(sref, view, vec)
            em.close()
        else:
            self._copy_elements(view, sref, "s2g")

    def _store_rows_realigned(self, sref, view, vec: int):
        """Shared -> global where the rows' global addresses are off vec * eb bytes (C's bf16 rows of an odd
        width, a view starting mid-chunk): each row's body in vec-element stores from its first aligned column on,
        its head (the columns before) and its tail by element. A row of W columns is W // vec + 1 segments taken by
        consecutive threads: segment 0 is the head [0, h), segment j >= 1 the columns [h + vec (j - 1), h + vec j)
        clipped to the tile and the tensor, built from the tile's aligned chunks j - 1 and j shifted by h
        (`tp_shift_pack`; element by element where a vector is not whole 32-bit words). G35: the element-by-element
        store was ~12 us of 2051 x 2045 x 1008's 28 on the H100."""
        em = self.em
        shape, dtype = sref.stype.shape, sref.dtype
        T, eb = ctype(dtype), dtype.bytes
        ptr, dims = view.tensor.ptr, view.tensor.dims
        last = len(view.starts) - 1
        W = shape[-1]
        seg = W // vec + 1
        slots = seg
        for n in shape[:-1]:
            slots *= n
        step = self.num_threads if self.tid_name != "0" else 1
        s, h, cl, lim, v = (self.tmp(x) for x in ("s", "h", "cl", "lim", "v"))
        em.open(f"for (int {s} = {self.tid_name}; {s} < {slots}; {s} += {step})")
        rem, rows = Var(s) // seg, []
        for d in range(len(shape) - 2, -1, -1):
            rows.append(rem % shape[d] if d > 0 else rem)
            rem = rem // shape[d]
        rows.reverse()
        idx, off = self._global_terms(view, rows + [Const(0)])
        ro = self.tmp("ro")
        em(f"const long long {ro} = {off};")
        em(f"const int {h} = (int)(({vec * eb}u - (unsigned)((unsigned long long)({ptr} + {ro}) % {vec * eb}u)) % "
           f"{vec * eb}u) / {eb};")
        j = sym_c(Var(s) % seg)
        em(f"const int {cl} = ({j}) == 0 ? 0 : {h} + {vec} * (({j}) - 1);")
        inb = " && ".join(f"(unsigned){i} < (unsigned)({dims[k]})" for k, i in enumerate(idx) if k != last)
        em(f"const int {lim} = {f'!({inb}) ? 0 : ' if inb else ''}tp_min<int>(tp_min<int>(({j}) == 0 ? {h} : "
           f"{h} + {vec} * ({j}), {W}), {dims[last]} - ({view.starts[last]}));")
        if vec * eb % 4:
            em(f"tp_pack<{T}, {vec}> {v};")
            for k in range(vec):
                soff = sym_c(sref.stype.offset(rows + [Var(cl) + k]))
                em(f"{v}.v[{k}] = {cl} + {k} < {lim} ? {sref.ptr}[{soff}] : {T}(0);")
        else:
            # segment j >= 1 spans the tile's aligned chunks j - 1 and j (shifted by h), the head chunk 0 alone
            u0 = sym_c(sref.stype.offset(rows + [Var(cl) // vec * vec]))
            u1 = sym_c(sref.stype.offset(rows + [(Var(cl) // vec + 1) * vec]))
            a0, a1 = self.tmp("a"), self.tmp("a")
            em(f"tp_pack<{T}, {vec}> {a0}{{}}, {a1}{{}};")
            em(f"if ({cl} < {lim}) {a0} = tp_ldvec<{T}, {vec}>({sref.ptr} + {u0});")
            em(f"if ({cl} % {vec} != 0 && {cl} + {vec} - {cl} % {vec} < {lim}) "
               f"{a1} = tp_ldvec<{T}, {vec}>({sref.ptr} + {u1});")
            em(f"const tp_pack<{T}, {vec}> {v} = {cl} % {vec} == 0 ? {a0} : tp_shift_pack<{T}, {vec}>({a0}, {a1}, "
               f"{cl} % {vec});")
        em.open(f"if ({lim} - {cl} == {vec})")
        em(f"tp_stvec<{T}, {vec}>({ptr} + {ro} + {cl}, {v});")
        em.close()
        em.open("else")
        for k in range(vec):
            em(f"if ({cl} + {k} < {lim}) {ptr}[{ro} + {cl} + {k}] = {v}.v[{k}];")
        em.close()
        em.close()

    def copy_s2s(self, src, dst):
        if tuple(src.stype.shape) != tuple(dst.stype.shape):
            raise self.error("copy between shared tiles of different shapes")
        for guard, coords in self._chunks(src.stype.shape, 1):
            if guard:
                self.em.open(f"if ({guard})")
            self.em(
                f"{dst.ptr}[{sym_c(dst.stype.offset(coords))}] = {src.ptr}[{sym_c(src.stype.offset(coords))}];"
            )
            if guard:
                self.em.close()
