"""AMD CDNA3 (gfx942) matrix cores: MFMA 32x32x8 and 16x16x16 (bf16/f16 -> f32), operands read from LDS
(or register tiles in the instruction's operand layouts) by each wave of 64 lanes.

Wave w of the WARPS = (gm, gn) grid owns accumulator blocks wm + gm*rr (rows) and wn + gn*rc (columns),
wm = w % gm, wn = w // gm. Lane l holds A row l % M_i at k = 4*(l // M_i) + 0..3 and B column l % N_i at
the same k (M_i = N_i = 32 or 16); the accumulator vector's register i sits at the rows the instruction's
C layout in `tilepy.instructions` gives.
"""

from __future__ import annotations

from tilepy.instructions import mma_operand_layout
from tilepy.symbolic import Var

from .cexpr import sym_c

_BUILTINS = {
    ("mfma_32", "bf16"): ("__builtin_amdgcn_mfma_f32_32x32x8bf16_1k", "tp_s4", "tp_f32x16"),
    ("mfma_32", "f16"): ("__builtin_amdgcn_mfma_f32_32x32x8f16", "tp_h4", "tp_f32x16"),
    ("mfma_16", "bf16"): ("__builtin_amdgcn_mfma_f32_16x16x16bf16_1k", "tp_s4", "tp_f32x4"),
    ("mfma_16", "f16"): ("__builtin_amdgcn_mfma_f32_16x16x16f16", "tp_h4", "tp_f32x4"),
}


def emit_mfma(r, e, acc, a, b):
    instr = e.attrs["instr"]
    gm, gn = e.attrs["warps"]
    M, N = acc.shape
    a_shared, b_shared = not hasattr(a, "layout"), not hasattr(b, "layout")
    K = (a.stype.shape if a_shared else a.shape)[1]
    mi, ki = instr.m, instr.k
    rep_r, rep_c, ksteps = M // (mi * gm), N // (mi * gn), K // ki
    nacc = instr.m * instr.n // 64
    fn, optype, acctype = _BUILTINS[("mfma_32" if mi == 32 else "mfma_16", instr.ab.name)]
    for ref, which, shape in ((a, "a", (M, K)), (b, "b", (K, N))):
        if hasattr(ref, "layout") and ref.layout != mma_operand_layout(instr, which, shape, (gm, gn)):
            raise r.error(
                f"MFMA operand {which.upper()} is a register tile whose layout is not the instruction's "
                "operand layout",
                f"load it with layout=tp.mma_layout(INSTR, '{which}', {shape}, {(gm, gn)})",
            )
    em = r.em
    wm, wn = r.hoist(f"tp_warp % {gm}"), r.hoist(f"tp_warp / {gm}")
    lane = Var("tp_lane")
    kq = 4 * (lane // mi)  # this lane's first k within a k-step
    em.open()
    for ks in range(ksteps):
        af = []
        for rr in range(rep_r):
            name = r.tmp("a")
            af.append(name)
            if a_shared:
                row = (Var(wm) + gm * rr) * mi + lane % mi
                vals = [
                    f"(short){a.ptr}[{sym_c(a.stype.offset([row, ks * ki + kq + j]))}].x" for j in range(4)
                ]
            else:
                base = 4 * (rr + rep_r * ks)
                vals = [f"(short){a.name}[{base + j}].x" for j in range(4)]
            em(f"const {optype} {name} = {_vector(optype, vals)};")
        bf = []
        for rc in range(rep_c):
            name = r.tmp("b")
            bf.append(name)
            if b_shared:
                col = (Var(wn) + gn * rc) * mi + lane % mi
                vals = [
                    f"(short){b.ptr}[{sym_c(b.stype.offset([ks * ki + kq + j, col]))}].x" for j in range(4)
                ]
            else:
                base = 4 * (ks + ksteps * rc)
                vals = [f"(short){b.name}[{base + j}].x" for j in range(4)]
            em(f"const {optype} {name} = {_vector(optype, vals)};")
        for rr in range(rep_r):
            for rc in range(rep_c):
                base = nacc * (rr + rep_r * rc)
                c = r.tmp("c")
                em(f"{acctype} {c} = {{{', '.join(f'{acc.name}[{base + i}]' for i in range(nacc))}}};")
                em(f"{c} = {fn}({af[rr]}, {bf[rc]}, {c}, 0, 0, 0);")
                for i in range(nacc):
                    em(f"{acc.name}[{base + i}] = {c}[{i}];")
    em.close()


def _vector(optype: str, vals: list) -> str:
    if optype == "tp_h4":
        vals = [f"__builtin_bit_cast(_Float16, {v})" for v in vals]
    return f"{optype}{{{', '.join(vals)}}}"
