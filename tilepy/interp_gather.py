"""Gather views and atomics on the CPU interpreter.

`_GatherOps` is mixed into `interpreter._Interpreter` (like interp_memops): `_op_gather_view` builds a
`GatherView`, which loads and stores use as they use windows; `_op_atomic_*` read-modify-write global
elements one slot at a time in slot order (thread-major), which is one of the orders the hardware may pick,
and return the old values as a register tile in logical shape (masked or out-of-bounds elements: 0).
"""

from __future__ import annotations

import numpy as np

from .errors import InterpreterError
from .interp_memory import GLOBAL, GatherView, GlobalView, TensorBuf
from .interp_ops import _at, _storage

_COMBINE = {
    "atomic_add": np.add,
    "atomic_max": np.maximum,
    "atomic_min": np.minimum,
}


class _GatherOps:
    """The gather and atomic ops of `_Interpreter` (a mixin: see the module docstring)."""

    def _op_gather_view(self, e, ctx):
        args = self._args(e, ctx)
        buf, index = args[0], args[1:]
        if not isinstance(buf, TensorBuf):
            raise InterpreterError(f"gather_view() needs a global tensor, got {type(buf).__name__}", e.span)
        if len(index) != len(buf.shape):
            raise InterpreterError(f"gather of '{buf.name}' (rank {len(buf.shape)}) takes {len(buf.shape)} "
                                   f"indices, got {len(index)}", e.span)
        for ix, a in zip(index, e.args[1:]):
            if self._is_pt(ix, a.type):
                raise InterpreterError("a gather index is a per-thread scalar; use an index tile", e.span)
        return GatherView(buf, tuple(index), tuple(e.type.shape))

    def _atomic(self, e, ctx):
        args = self._args(e, ctx)
        dst = args[0]
        nvals = 2 if e.op == "atomic_cas" else 1
        vals = args[1:1 + nvals]
        mask = args[1 + nvals] if e.attrs.get("masked") else None
        if not isinstance(dst, GlobalView):
            raise InterpreterError(f"{e.op}() needs a global view, got {type(dst).__name__}", e.span)
        layout, shape, dtype = e.type.layout, tuple(e.type.shape), e.type.dtype
        tids, act = self._thread_map(layout, ctx, e.span)
        from .interp_memops import _owners, _owners_of

        if act is None:
            t_idx, v_idx = _owners(layout)
        else:
            t_idx, v_idx = _owners_of(layout, np.broadcast_to(act[:, None], (layout.num_threads, layout.num_values)))
        coords = tuple(c[t_idx, v_idx] for c in layout.coords)
        n = t_idx.shape[0]
        operands = [np.asarray(_at(np.broadcast_to(self._tile_operand(v, a.type, layout, shape, ctx, e.span), shape),
                                   coords, (n,))) for v, a in zip(vals, e.args[1:])]
        thr = tids[t_idx]
        off, inb = dst.locate(coords, thr)
        w = np.broadcast_to(inb, (n,)).copy()
        if mask is not None:
            m = self._tile_operand(mask, e.args[1 + nvals].type, layout, shape, ctx, e.span)
            w &= np.asarray(_at(np.broadcast_to(np.asarray(m, dtype=bool), shape), coords, (n,)))
        off = np.broadcast_to(off, (n,))
        flat = dst.buf.flat
        old = np.zeros(n, dtype=flat.dtype)
        sel = np.nonzero(w)[0]
        remaining = sel
        while remaining.size:  # rounds of distinct elements, each slot after the earlier slots on its element
            _, first = np.unique(off[remaining], return_index=True)
            now = remaining[np.sort(first)]
            remaining = np.delete(remaining, first)
            o = flat[off[now]]
            old[now] = o
            if e.op == "atomic_cas":
                cmp, new = (_storage(x[now], dtype) for x in operands)
                hit = _bits(o) == _bits(cmp)
                flat[off[now][hit]] = new[hit]
            else:
                flat[off[now]] = _storage(_COMBINE[e.op](_wide(o), _wide(operands[0][now])), dtype)
        if self.recording:
            op, it, seq = self._rec_ctx(e, ctx)
            for write in (False, True):
                self.rec.add(block=self.block_lin, thread=thr[sel], space=GLOBAL, buffer=dst.buf.index,
                             offset=off[sel], nbytes=dst.dtype.bytes, write=write, interval=self.interval,
                             interval_end=self.interval, op=op, iteration=it, seq=seq)
        out = np.zeros(shape, dtype=dtype.np)
        if coords:
            out[coords] = old
        elif n:
            out[()] = old[0]
        return _storage(out, dtype)

    _op_atomic_add = _op_atomic_max = _op_atomic_min = _op_atomic_cas = _atomic


def _bits(x):
    """Compare-and-swap compares stored bits, as the hardware does (-0.0 is not 0.0; NaN can match)."""
    x = np.ascontiguousarray(x)
    return x.view(np.uint32) if x.dtype == np.float32 else x


def _wide(x):
    """Integers combine in int64 (then wrap to the element type); floats in float32."""
    x = np.asarray(x)
    return x.astype(np.int64) if x.dtype.kind in "iu" else x.astype(np.float32)


__all__ = ["_GatherOps"]
