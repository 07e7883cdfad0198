"""Scans (tp.cumsum / tp.cumprod) and reshapes of register tiles, through a shared scratch tile.

The owners of the tile's elements write it to shared memory in row-major order (one barrier); then each
thread computes its own elements: a reshape reads the element with the same row-major index in the new
shape, a scan combines the elements before (or after) it along the axis. A scan costs O(n) reads per
element for an axis of n elements, which is fine for the tile sizes register tiles have.
"""

from __future__ import annotations

from tilepy import dtypes as dt
from tilepy.int_tuple import product

from .cexpr import cast, compute_type, ctype, is_half, literal

_SCAN = {"scan_sum": ("+", 0), "scan_prod": ("*", 1)}


class ScanOps:
    def _to_scratch(self, src) -> str:
        """Write register tile `src` to a fresh shared scratch tile in row-major order; returns the C buffer."""
        self.need_uniform(f"a tile redistribution ({src.name})")
        off = self.scratch(product(src.shape) * max(src.dtype.bytes, 1), 16)
        buf = f"(({ctype(src.dtype)}*)(tp_smem + {off}))"
        cond, keep = self.owner(src.layout)
        coords = self.out_coords(src.layout)
        if self.ctx.loop_depth:
            self.barrier()  # an earlier run of this statement (in a loop) may still read the scratch
        for v in range(src.layout.num_values):
            if keep[v]:
                store = f"{buf}[{self.flat_index(coords, src.shape, v)}] = {src.name}[{v}];"
                self.em(f"if ({cond}) {store}" if cond else store)
        self.barrier()
        return buf

    def emit_reshape(self, e, dst):
        src = self.operand_ref(e.args[0])
        buf = self._to_scratch(src)
        coords = self.out_coords(dst.layout)
        for v in range(dst.layout.num_values):
            self.em(f"{dst.name}[{v}] = {buf}[{self.flat_index(coords, dst.shape, v)}];")

    def emit_scan(self, e, dst):
        src = self.operand_ref(e.args[0])
        axis, rev, excl = e.attrs["axis"], bool(e.attrs.get("reverse")), bool(e.attrs.get("exclusive"))
        op, identity = _SCAN[e.op]
        buf = self._to_scratch(src)
        n = src.shape[axis]
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
