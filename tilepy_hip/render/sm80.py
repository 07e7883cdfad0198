"""NVIDIA warp-level MMA (mma.sync m16n8k16 bf16/f16 and m16n8k8 tf32 -> f32) fed by ldmatrix from shared memory
or from register tiles in the instruction's operand layouts. Used on sm_80 and sm_90a.

A k-step is 32 bytes of K either way (16 bf16 or 8 f32), so the ldmatrix addressing is the same in bytes: an
8 x 8 b16 matrix is 8 rows of 4 f32 for tf32, which hands lane (g, t) element (row g, column t), exactly the
tf32 fragments' a0..a3 / b0..b1. tf32 has no transposing ldmatrix: A must be row-major and B K-major.

Warp w of the WARPS = (gm, gn) grid owns accumulator fragments at row blocks wm + gm*rr and column blocks
wn + gn*rc (wm = w % gm, wn = w // gm), as `tilepy.instructions.mma_operand_layout` lays them out.
"""

from __future__ import annotations

from tilepy.instructions import mma_operand_layout
from tilepy.symbolic import Var

from .cexpr import sym_c


def _strides(sref):
    st = sref.stype
    stride = st.layout.stride
    if not (isinstance(stride, tuple) and len(stride) == 2 and all(isinstance(s, int) for s in stride)):
        return None
    return stride


def _ldmatrix_operand(r, sref, which: str):
    """(transposed?) for reading an A (m x k) or B (k x n) shared tile with ldmatrix, or a CompileError."""
    strides = _strides(sref)
    sw = sref.stype.swizzle
    ok_swizzle = sw is None or (1 << sw.base) * sref.dtype.bytes >= 16
    if strides is not None and ok_swizzle and sref.align >= 16:  # a window may start off a 16-byte row
        s0, s1 = strides
        # ldmatrix reads 8 rows of 16 contiguous bytes each: one dimension contiguous, the other 16B-aligned.
        if s1 == 1 and s0 % 8 == 0:
            return which == "b"  # A row-major: plain; B with n contiguous: .trans
        if s0 == 1 and s1 % 8 == 0:
            return which == "a"
    raise r.error(
        f"MMA operand {which.upper()} in shared memory has layout {sref.stype.layout} "
        f"(swizzle {sw}); ldmatrix needs one dimension contiguous, the other a multiple of 8 elements "
        "apart, a swizzle that keeps 16-byte chunks whole, and (for a window) a 16-byte aligned start",
        "use a row-major shared tile with tp.Swizzle(b, 3, 3) for 2-byte elements",
    )


def _check_reg_operand(r, ref, instr, which, shape, warps):
    want = mma_operand_layout(instr, which, shape, warps)
    if ref.layout != want:
        raise r.error(
            f"MMA operand {which.upper()} is a register tile in layout {ref.layout}, not the "
            f"instruction's operand layout {want}",
            f"load it with layout=tp.mma_layout(INSTR, '{which}', {shape}, {warps})",
        )


def emit_mma_sync(r, e, acc, a, b):
    instr = e.attrs["instr"]
    gm, gn = e.attrs["warps"]
    M, N = acc.shape
    a_shared = not hasattr(a, "layout")
    b_shared = not hasattr(b, "layout")
    K = (a.stype.shape if a_shared else a.shape)[1]
    kk = instr.k
    half_k = kk // 2  # the second 8 x 8 matrix along K starts 16 bytes on
    tf32 = instr.format == "tf32"
    rep_r, rep_c, ksteps = M // (16 * gm), N // (8 * gn), K // kk
    ab = instr.format
    em = r.em
    wm, wn = r.hoist(f"tp_warp % {gm}"), r.hoist(f"tp_warp / {gm}")
    lane, W = Var("tp_lane"), Var(wm)
    j, row8 = lane // 8, lane % 8
    em.open()
    if a_shared:
        a_trans = _ldmatrix_operand(r, a, "a")
        if tf32 and a_trans:
            raise r.error(f"{instr.name} reads A from shared memory row-major only (no transposing ldmatrix "
                          "for 32-bit elements)", "store A as a row-major (M, K) shared tile")
        sa = r.tmp("sa")
        em(f"const unsigned {sa} = tp_smem_addr({a.ptr});")
    else:
        _check_reg_operand(r, a, instr, "a", (M, K), (gm, gn))
    if b_shared:
        b_trans = _ldmatrix_operand(r, b, "b")
        if tf32 and b_trans:
            raise r.error(f"{instr.name} reads B from shared memory K-major only (no transposing ldmatrix for "
                          "32-bit elements)", "keep B as the (N, K) tile and pass its transpose: b_s.T")
        sb = r.tmp("sb")
        em(f"const unsigned {sb} = tp_smem_addr({b.ptr});")
    else:
        _check_reg_operand(r, b, instr, "b", (K, N), (gm, gn))
    eb = instr.ab.bytes
    a_vals, b_vals = instr.a.num_values, instr.b.num_values
    for ks in range(ksteps):
        kb = ks * kk
        af = []
        for rr in range(rep_r):
            regs = [r.tmp("a") for _ in range(4)]
            af.append(regs)
            em(f"unsigned {', '.join(regs)};")
            if a_shared:
                mb = (W + gm * rr) * 16
                # matrix q of x4 = (rows +8*(q%2), k +8*(q//2)): the order of mma's a0..a3.
                if a_trans:
                    coord = (mb + 8 * (j % 2), kb + half_k * (j // 2) + row8)
                else:
                    coord = (mb + 8 * (j % 2) + row8, kb + half_k * (j // 2))
                off = sym_c(a.stype.offset(list(coord)))
                fn = "tp_ldmatrix_x4_trans" if a_trans else "tp_ldmatrix_x4"
                em(f"{fn}({sa} + ({off}) * {eb}, {', '.join(regs)});")
            else:
                base = a_vals * (rr + rep_r * ks)
                for i, reg in enumerate(regs):
                    em(_reg_from_values(reg, a.name, base, i, tf32))
        bf = []
        for _ in range(rep_c):
            regs = [r.tmp("b") for _ in range(2)]
            bf.append(regs)
            em(f"unsigned {', '.join(regs)};")
        if b_shared:
            for pc in range(0, rep_c, 2):
                pair = rep_c - pc >= 2
                q = j if pair else j % 2  # x2 reads only lanes 0-15's addresses
                nb = (Var(wn) + gn * (pc + q // 2)) * 8 if pair else (Var(wn) + gn * pc) * 8
                if b_trans:
                    coord = (kb + half_k * (q % 2) + row8, nb)
                else:
                    coord = (kb + half_k * (q % 2), nb + row8)
                off = sym_c(b.stype.offset(list(coord)))
                suffix = "_trans" if b_trans else ""
                if pair:
                    em(f"tp_ldmatrix_x4{suffix}({sb} + ({off}) * {eb}, {', '.join(bf[pc] + bf[pc + 1])});")
                else:
                    em(f"tp_ldmatrix_x2{suffix}({sb} + ({off}) * {eb}, {', '.join(bf[pc])});")
        else:
            for rc in range(rep_c):
                base = b_vals * (ks + ksteps * rc)
                for i, reg in enumerate(bf[rc]):
                    em(_reg_from_values(reg, b.name, base, i, tf32))
        for rr in range(rep_r):
            for rc in range(rep_c):
                base = 4 * (rr + rep_r * rc)
                cs = ", ".join(f"{acc.name}[{base + i}]" for i in range(4))
                em(f"tp_mma_m16n8k{kk}_{ab}({cs}, {', '.join(af[rr])}, {', '.join(bf[rc])});")
    em.close()


def _reg_from_values(reg: str, arr: str, base: int, i: int, tf32: bool) -> str:
    """Register i of a fragment from a register tile's values: one f32 as its bits (tf32), or two 16-bit
    values packed low-first."""
    if tf32:
        return f"{reg} = tp_float_as_uint({arr}[{base + i}]);"
    return f"{reg} = tp_pack2({arr}[{base + 2 * i}], {arr}[{base + 2 * i + 1}]);"
