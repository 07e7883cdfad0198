"""MMA operand layouts: a register operand (and the accumulator) must hold, in each thread's registers,
exactly the elements the instruction reads there: its layout must equal the instruction's fragment layout
tiled over the warp grid (compared as functions over all (thread, value) slots). wgmma operands come from
shared memory through a descriptor: their swizzle must be one the descriptor can express (none, or
16-byte units XOR-ed by 1 to 3 bits: the 32/64/128-byte modes) and rows must be a whole number of swizzle
atoms; tf32 and e4m3 operands must be K-major (no transpose bit for them)."""

from __future__ import annotations

import numpy as np

from tilepy.instructions import mma_operand_layout

from ..counterexample import thread_fields
from ..report import Finding


def _compare(actual, expected):
    if (actual.num_threads, actual.num_values) != (expected.num_threads, expected.num_values):
        return "shape", None
    diff = np.zeros((actual.num_threads, actual.num_values), dtype=bool)
    for ca, ce in zip(actual.coords, expected.coords):
        diff |= ca != ce
    idx = np.argwhere(diff)
    if idx.size == 0:
        return None, None
    return "slot", (int(idx[0][0]), int(idx[0][1]))


def check(ctx) -> list:
    out = []
    ws = ctx.analysis.target.warp_size
    for op in ctx.analysis.mma_ops:
        instr, warps = op.instr, op.warps
        for which, (typ, layout) in op.operands.items():
            if layout is None:
                if instr.smem_operands:
                    f = _wgmma_smem(ctx, op, which, typ)
                    if f is not None:
                        out.append(f)
                continue
            if instr.operand(which) is None:
                continue
            expected = mma_operand_layout(instr, which, tuple(typ.shape), warps)
            kind, slot = _compare(layout, expected)
            if kind is None:
                continue
            name = {"a": "A", "b": "B", "c": "the accumulator"}[which]
            if kind == "shape":
                cex = {"detail": f"layout {layout} has T={layout.num_threads}, V={layout.num_values}; "
                                 f"{instr.name} needs T={expected.num_threads}, V={expected.num_values}"}
            else:
                t, v = slot
                cex = {**thread_fields(t, ws), "value": v,
                       "actual": tuple(int(c[t, v]) for c in layout.coords),
                       "expected": tuple(int(c[t, v]) for c in expected.coords),
                       "detail": f"register {v} of thread {t} holds element "
                                 f"{tuple(int(c[t, v]) for c in layout.coords)} but {instr.name} reads it as element "
                                 f"{tuple(int(c[t, v]) for c in expected.coords)} of {name}"}
            out.append(Finding(
                "mma_layout", "error",
                f"MMA operand {name} has layout {layout.name}, not {instr.name}'s {which.upper()} fragment layout "
                f"{expected.name}: convert it with tp.convert_layout(x, tp.mma_layout(instr, '{which}', shape, "
                f"warps)) or load it with that layout", op.span, cex))
    return out


def _k_major(typ, which) -> bool:
    """Whether K is the contiguous dimension of a shared operand as the instruction sees it (A: (M, K), B:
    (K, N)); a transposed view `s.T` has its layout's strides swapped, so an (N, K) tile read as `.T` is."""
    step = typ.layout(0, 1) - typ.layout(0, 0) if which == "a" else typ.layout(1, 0) - typ.layout(0, 0)
    return step == 1


def _wgmma_smem(ctx, op, which, typ):
    if op.instr.k_major_only and len(typ.shape) == 2 and not _k_major(typ, which):
        name = which.upper()
        tile = "(BM, BK)" if which == "a" else "(BN, BK)"
        use = "a_s[s]" if which == "a" else "b_s[s].T"
        return Finding(
            "mma_layout", "error",
            f"wgmma operand {name} is MN-major in shared memory, but {op.instr.name} reads {op.instr.format} "
            f"operands K-major only (the descriptor's transpose bit exists for 16-bit types alone)", op.span,
            {"detail": f"store {name} as a row-major {tile} tile (K contiguous, what a row-major "
                       f"{'(M, K) A' if which == 'a' else '(N, K) weight'} copies into) and pass {use}",
             "shape": tuple(typ.shape)})
    eb = typ.dtype.bytes
    sw = typ.swizzle
    # the contiguous dimension's extent: the first for a transposed view (`b_s.T` of a row-major (N, K) tile)
    column_major = len(typ.shape) == 2 and typ.layout(1, 0) - typ.layout(0, 0) == 1
    row_bytes = (typ.shape[0] if column_major else typ.shape[-1]) * eb
    unit = 16 // eb  # elements per 16-byte unit
    if sw is None:
        return None
    ok_modes = {b: 16 * (1 << b) for b in (1, 2, 3)}
    legal = sw.base == unit.bit_length() - 1 and sw.shift == 3 and sw.bits in ok_modes
    if legal and row_bytes % ok_modes[sw.bits] == 0:
        return None
    span_bytes = 16 * (1 << sw.bits) if legal else None
    if not legal:
        detail = (f"{sw} is not a wgmma swizzle mode for {typ.dtype} (use Swizzle(b, {unit.bit_length() - 1}, 3) "
                  f"with b = 1, 2, 3 for the 32/64/128-byte modes)")
    else:
        detail = (f"rows of {row_bytes} bytes are not a multiple of the {span_bytes}-byte swizzle atom of {sw}; "
                  f"use Swizzle({max(1, (row_bytes // 16).bit_length() - 1)}, {unit.bit_length() - 1}, 3)")
    return Finding("mma_layout", "error",
                   f"wgmma operand {which.upper()} in shared memory has a layout the descriptor cannot express",
                   op.span, {"detail": detail, "swizzle": repr(sw), "row_bytes": row_bytes})
