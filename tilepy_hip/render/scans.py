"""Scans (tp.cumsum / tp.cumprod) and reshapes of register tiles, through a shared scratch tile.

The owners of the tile's elements write it to shared memory in row-major order (one barrier); then each
thread computes its own elements: a reshape reads the element with the same row-major index in the new
shape.

A scan along an axis of n elements splits each line of the axis into P segments of L = n / P elements, so
that the block's threads cover lines x segments: each thread scans its segment in place (L steps) and
writes the segment's total; after a barrier it combines the totals of the segments before (after, reversed)
its own (< P steps) into its segment; after a second barrier every thread reads its own elements (the one
before or after them when exclusive). O(n / P + P) per thread instead of O(n) per element. The scratch is
in the compute type (f32 for 16-bit floats and e4m3) and padded one slot per 32 so the segment walks of a
warp's threads fall in different banks. Axes of at most 8 elements keep the direct sum of each prefix.
"""

from __future__ import annotations

from tilepy import dtypes as dt
from tilepy.int_tuple import product

from .cexpr import cast, compute_type, ctype, is_half, literal

_SCAN = {"scan_sum": ("+", 0), "scan_prod": ("*", 1)}


class ScanOps:
    def _to_scratch(self, src, as_dtype=None, pad=False) -> str:
        """Write register tile `src` to a fresh shared scratch tile in row-major order (in `as_dtype`; `pad`:
        one unused slot after every 32, index through `_padded`); returns the C buffer."""
        self.need_uniform(f"a tile redistribution ({src.name})")
        dtype = as_dtype or src.dtype
        n = product(src.shape)
        nbytes = (n + n // 32 + 1 if pad else n) * max(dtype.bytes, 1)
        off = self.scratch(nbytes, 16)
        self._scratch_last = (off, nbytes)     # still read after a later request of the same op (keep=)
        buf = f"(({ctype(dtype)}*)(tp_smem + {off}))"
        cond, keep = self.owner(src.layout)
        coords = self.out_coords(src.layout)
        if self.ctx.loop_depth:
            self.barrier()  # an earlier run of this statement (in a loop) may still read the scratch
        for v in range(src.layout.num_values):
            if keep[v]:
                idx = self.flat_index(coords, src.shape, v)
                value = cast(f"{src.name}[{v}]", src.dtype, dtype) if dtype != src.dtype else f"{src.name}[{v}]"
                store = f"{buf}[{_padded(idx) if pad else idx}] = {value};"
                self.em(f"if ({cond}) {store}" if cond else store)
        self.barrier()
        return buf

    def emit_reshape(self, e, dst):
        src = self.operand_ref(e.args[0])
        if _same_slots(src.layout, dst.layout):   # each thread already holds its elements, in the same slots
            for v in range(dst.layout.num_values):
                self.em(f"{dst.name}[{v}] = {src.name}[{v}];")
            return
        buf = self._to_scratch(src)
        coords = self.out_coords(dst.layout)
        for v in range(dst.layout.num_values):
            self.em(f"{dst.name}[{v}] = {buf}[{self.flat_index(coords, dst.shape, v)}];")

    def emit_scan(self, e, dst):
        src = self.operand_ref(e.args[0])
        axis, rev, excl = e.attrs["axis"], bool(e.attrs.get("reverse")), bool(e.attrs.get("exclusive"))
        op, identity = _SCAN[e.op]
        n = src.shape[axis]
        if n > 8:
            return self._segmented_scan(src, dst, axis, rev, excl, op, identity)
        buf = self._to_scratch(src)
        stride = product(src.shape[axis + 1:])
        comp = dt.f32 if is_half(src.dtype) else src.dtype   # 16-bit floats and e4m3 scan in f32
        ct = compute_type(src.dtype)
        coords = self.out_coords(dst.layout)
        base_coords = list(coords)
        base_coords[axis] = self._zero_like(coords[axis])
        for v in range(dst.layout.num_values):
            i = coords[axis].c(v)
            lo, hi = ((f"({i}) + {1 if excl else 0}", str(n)) if rev else ("0", f"({i}) + {0 if excl else 1}"))
            j, acc = self.tmp("j"), self.tmp("acc")
            read = cast(f"{buf}[{self.flat_index(base_coords, src.shape, v)} + {j} * {stride}]", src.dtype, comp)
            self.em.open()
            self.em(f"{ct} {acc} = {literal(identity, comp)};")
            self.em(f"for (int {j} = {lo}; {j} < {hi}; ++{j}) {acc} = {acc} {op} {read};")
            self.em(f"{dst.name}[{v}] = {cast(acc, comp, dst.dtype)};")
            self.em.close()

    def _segmented_scan(self, src, dst, axis, rev, excl, op, identity):
        comp = dt.f32 if is_half(src.dtype) else src.dtype
        ct = ctype(comp)
        buf = self._to_scratch(src, comp, pad=True)
        n = src.shape[axis]
        stride = product(src.shape[axis + 1:])
        lines = product(src.shape) // n
        T = self.kir.num_threads
        P = 1
        while P * 2 <= n and lines * P * 2 <= T:
            P *= 2
        L = -(-n // P)
        W = lines * P
        aux = f"(({ct}*)(tp_smem + {self.scratch(W * max(comp.bytes, 1), 16, keep=self._scratch_last)}))"
        ident = literal(identity, comp)

        def at(j):  # element j of the thread's line
            return f"{buf}[{_padded(f'tp_sb + ({j}) * {stride}')}]"

        def walk(head):
            self.em(f"for (int tp_w = tp_tid; tp_w < {W}; tp_w += {T}) {{")
            self.em(f"  const int tp_ln = tp_w / {P}, tp_sg = tp_w % {P};")
            self.em(f"  const int tp_sb = (tp_ln / {stride}) * {n * stride} + tp_ln % {stride};")
            self.em(f"  const int tp_lo = tp_sg * {L}, tp_hi = tp_lo + {L} < {n} ? tp_lo + {L} : {n};")
            for line in head:
                self.em("  " + line)
            self.em("}")

        self.em.open()
        loop = ("for (int tp_j = tp_hi - 1; tp_j >= tp_lo; --tp_j)" if rev
                else "for (int tp_j = tp_lo; tp_j < tp_hi; ++tp_j)")
        walk([f"{ct} tp_acc = {ident};",
              f"{loop} {{ tp_acc = tp_acc {op} {at('tp_j')}; {at('tp_j')} = tp_acc; }}",
              f"{aux}[tp_w] = tp_acc;"])
        self.barrier()
        others = (f"for (int tp_q = tp_sg + 1; tp_q < {P}; ++tp_q)" if rev
                  else "for (int tp_q = 0; tp_q < tp_sg; ++tp_q)")
        walk([f"{ct} tp_off = {ident};",
              f"{others} tp_off = tp_off {op} {aux}[tp_ln * {P} + tp_q];",
              f"if ({'tp_sg < ' + str(P - 1) if rev else 'tp_sg > 0'}) "
              f"for (int tp_j = tp_lo; tp_j < tp_hi; ++tp_j) {at('tp_j')} = tp_off {op} {at('tp_j')};"])
        self.em.close()
        self.barrier()
        coords = self.out_coords(dst.layout)
        for v in range(dst.layout.num_values):
            idx = self.flat_index(coords, src.shape, v)
            if not excl:
                val = f"{buf}[{_padded(idx)}]"
            else:
                i = coords[axis].c(v)
                edge, nb = (f"({i}) == {n - 1}", f"({idx}) + {stride}") if rev else (f"({i}) == 0",
                                                                                   f"({idx}) - {stride}")
                val = f"({edge} ? {ident} : {buf}[{_padded(nb)}])"
            self.em(f"{dst.name}[{v}] = {cast(val, comp, dst.dtype)};")
        self.barrier()  # the scratch is read back before any later statement reuses shared memory


def _padded(idx: str) -> str:
    """Index into a scratch padded by one slot per 32 (spreads strided walks over the banks)."""
    return f"(({idx}) + (({idx}) >> 5))"


def _same_slots(a, b) -> bool:
    """Layouts `a` and `b` (of tiles with the same element count) put, in every thread and value slot, the element
    of the same row-major index: a reshape between them is a register copy."""
    import numpy as np

    return (a.num_threads == b.num_threads and a.num_values == b.num_values
            and bool(np.array_equal(a.flat, b.flat)))
