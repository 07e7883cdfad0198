"""The `mma` op on the CPU interpreter: matrix multiply-accumulate as the instruction computes it, per
thread group, including the hardware's reinterpretation of registers whose layout differs from the
instruction's fragment layout (docs/architecture.md, "register tiles are logical in the interpreter"), and
the recording of operand reads from shared memory (ldmatrix-like fragments, or wgmma descriptors).

`_MmaOps` is mixed into `interpreter._Interpreter`, which dispatches the `mma` op to `_op_mma`.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .errors import InterpreterError
from .instructions import ALL as ALL_INSTRS
from .instructions import MmaInstr, mma_operand_layout
from .interp_memory import SHARED, SharedRef
from .interp_ops import _at, _scatter, _storage
from .tv_layout import TVLayout
from .types import RegType


@lru_cache(maxsize=512)
def _mma_layout(instr: MmaInstr, which: str, tile: tuple, warps: tuple) -> TVLayout:
    return mma_operand_layout(instr, which, tile, warps)


@lru_cache(maxsize=1024)
def _same_tv(a: TVLayout, b: TVLayout) -> bool:
    if a == b:
        return True
    if tuple(a.tile) != tuple(b.tile) or a.num_threads != b.num_threads or a.num_values != b.num_values:
        return False
    return all(np.array_equal(x, y) for x, y in zip(a.coords, b.coords))


class _MmaOps:
    """The mma op of `_Interpreter` (a mixin: see the module docstring)."""

    def _op_mma(self, e, ctx):
        a, b, acc = self._args(e, ctx)[:3]
        ta, tb, tc = (x.type for x in e.args[:3])
        instr = e.attrs.get("instr")
        if isinstance(instr, str):
            instr = ALL_INSTRS[instr if "." in instr else next(k for k in ALL_INSTRS if k.endswith("." + instr))]
        if not isinstance(instr, MmaInstr):
            raise InterpreterError("mma needs attrs{instr: MmaInstr}", e.span)
        if not isinstance(tc, RegType):
            raise InterpreterError(f"mma accumulator must be a register tile, got {tc}", e.span)
        M, N = tc.shape
        K = (a.shape if isinstance(a, SharedRef) else np.shape(a))[1]
        warps = tuple(e.attrs["warps"]) if e.attrs.get("warps") else self._mma_warps(instr, tc.layout, e.span)
        try:
            Lc = _mma_layout(instr, "c", (M, N), warps)
        except ValueError as ex:
            raise InterpreterError(str(ex), e.span) from None
        tids, act = self._thread_map(Lc, ctx, e.span)
        A = self._mma_operand(instr, "a", a, ta, (M, K), warps, tids, act, e, ctx)
        B = self._mma_operand(instr, "b", b, tb, (K, N), warps, tids, act, e, ctx)
        C = self._reg_operand(instr, "c", np.asarray(acc, dtype=np.float32), tc.layout, Lc, e)
        rt = e.type if isinstance(e.type, RegType) else tc
        Lr = rt.layout or Lc
        if A[0] == "full" and B[0] == "full" and C[0] == "full" and _same_tv(Lr, Lc):
            res = C[1] + A[1] @ B[1]
        else:
            if (Lr.num_threads, Lr.num_values) != (Lc.num_threads, Lc.num_values):
                raise InterpreterError(f"mma result layout {Lr} has a different thread/value shape than "
                                       f"{instr.name}'s accumulator layout {Lc}", e.span)
            Tf = instr.threads
            regs = np.empty((Lc.num_threads, Lc.num_values), dtype=np.float32)
            for g in range(warps[0] * warps[1]):
                sl = slice(g * Tf, (g + 1) * Tf)
                Dg = self._group_matrix(C, sl, (M, N)) + self._group_matrix(A, sl, (M, K)) @ self._group_matrix(
                    B, sl, (K, N))
                regs[sl] = Dg[tuple(c[sl] for c in Lc.coords)]
            res = _scatter((M, N), Lr.coords, regs, 0, np.float32)
        return _storage(res, rt.dtype)

    def _mma_warps(self, instr: MmaInstr, Lacc: TVLayout, span) -> tuple:
        n = Lacc.num_threads if Lacc is not None else 0
        if not n or n % instr.threads:
            raise InterpreterError(f"mma accumulator layout {Lacc} does not spread over whole {instr.threads}-thread "
                                   f"groups of {instr.name}", span)
        G = n // instr.threads
        origin = getattr(Lacc, "origin", ())
        if origin and len(origin) >= 3 and origin[1] == "c":
            return tuple(origin[2])
        ts = Lacc.thread_shape
        if len(ts) >= 2 and ts[-2] * ts[-1] == G:
            return (int(ts[-2]), int(ts[-1]))
        return (G, 1)

    @staticmethod
    def _group_matrix(op, sl, shape):
        if op[0] == "full":
            return op[1]
        _, regs, L = op
        m = np.zeros(shape, dtype=np.float32)
        m[tuple(c[sl] for c in L.coords)] = regs[sl]
        return m

    def _reg_operand(self, instr, which, x, Lact, Lexp, e):
        """('full', matrix) when the registers hold the operand as the instruction reads it, else
        ('regs', physical registers [T, V], expected layout): the instruction reinterprets the registers."""
        if Lact is None or _same_tv(Lact, Lexp):
            return ("full", x)
        if (Lact.num_threads, Lact.num_values) != (Lexp.num_threads, Lexp.num_values):
            raise InterpreterError(
                f"mma operand {which.upper()} has layout {Lact} (T={Lact.num_threads}, V={Lact.num_values}) but "
                f"{instr.name} reads it as {Lexp} (T={Lexp.num_threads}, V={Lexp.num_values}); convert_layout it "
                "first", e.span)
        return ("regs", _at(x, Lact.coords, (Lact.num_threads, Lact.num_values)), Lexp)

    def _mma_operand(self, instr, which, x, t, shape, warps, tids, act, e, ctx):
        frag = instr.operand(which)
        if isinstance(x, SharedRef):
            if tuple(x.shape) != tuple(shape):
                raise InterpreterError(f"mma operand {which.upper()} is a {list(x.shape)} shared tile; expected "
                                       f"{list(shape)}", e.span)
            off = x.offsets(None, e.span)  # [shape], every element: what the instruction reads
            full = instr.read_operand(x.buf.array[off])  # tf32: the low mantissa bits are ignored
            if self.recording:
                self._record_mma_reads(instr, which, x, shape, warps, tids, act, off, e, ctx)
            return ("full", full)
        if not isinstance(t, RegType):
            raise InterpreterError(f"mma operand {which.upper()} must be a register or shared tile, got {t}", e.span)
        if frag is None:
            raise InterpreterError(f"{instr.name} reads operand {which.upper()} from shared memory; pass a shared "
                                   "tile (stage) instead of a register tile", e.span)
        try:
            Lexp = _mma_layout(instr, which, tuple(shape), warps)
        except ValueError as ex:
            raise InterpreterError(str(ex), e.span) from None
        vals = instr.read_operand(np.asarray(x))
        return self._reg_operand(instr, which, vals, t.layout, Lexp, e)

    def _record_mma_reads(self, instr, which, x, shape, warps, tids, act, off_all, e, ctx):
        op, it, seq = self._rec_ctx(e, ctx)
        frag = instr.operand(which)
        if frag is not None:  # each thread reads the elements of its fragment (ldmatrix-like)
            L = _mma_layout(instr, which, tuple(shape), warps)
            off = x.offsets(span=e.span, tv=L)
            thr = np.broadcast_to(tids[:, None], off.shape)
            if act is not None:
                keep = np.broadcast_to(act[:, None], off.shape)
                off, thr = off[keep], thr[keep]
        else:  # descriptor-based (wgmma): each group reads its rows of A / columns of B, by its first thread
            gm, gn = warps
            p, q = instr.operand_shape(which)
            r, c = np.indices(shape)
            offs, thrs = [], []
            for g in range(gm * gn):
                gi, gj = g % gm, g // gm
                sel = (r // p) % gm == gi if which == "a" else (c // q) % gn == gj
                first = g * instr.threads
                if act is not None and not act[first]:
                    continue
                offs.append(off_all[sel])
                thrs.append(np.full(int(sel.sum()), tids[first]))
            off = np.concatenate(offs) if offs else np.empty(0, np.int64)
            thr = np.concatenate(thrs) if thrs else np.empty(0, np.int64)
        self.rec.add(block=self.block_lin, thread=thr, space=SHARED, buffer=x.buf.index, offset=off,
                     nbytes=x.dtype.bytes, write=False, interval=self.interval, interval_end=self.interval, op=op,
                     iteration=it, seq=seq)
