"""H2: gemm_fp8_swap's policy forms (and the bf16 swap forms at 16 / 32 / 96 rows) rendered with and without
`unsigned_role_index` (G37's option: the role thread index outside loops as the unsigned remainder). Per form:
registers, spill bytes, LDL / STL, SASS instruction count. sm_90a, compiled on the host (NVRTC + cuobjdump, no GPU).

    python benchmarks/profile/h2_sass.py [--rows 16 32 ...] [--nk 4096,4096 ...] [--bf16]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp8, gemm_hopper  # noqa: E402


def toggled(kernel, on: bool):
    """`kernel` itself where its option already reads `on`, else a clone (own caches) with the option set."""
    if kernel.unsigned_role_index == on:
        return kernel
    k = kernel.retyped()
    k.unsigned_role_index = on
    return k


def short(kp) -> str:
    keys = ("BM", "BN", "STAGES", "CONSUMERS", "SPLIT_K", "CLUSTER_K", "K_WAYS", "CLUSTER_M", "HALF_SUM", "STORE_T",
            "TMA_ONLY")
    return " ".join(f"{k}={kp[k]}" for k in keys if k in kp)


def measure(kernel, kp) -> dict:
    ck = tilepy_hip.compile(kernel, target="sm_90a", force=True, **kp)
    sass = ck.sass()
    res = ck.resources
    return {"regs": res.get("registers"), "spill": res.get("spill_stores", 0),
            "ldst": len(re.findall(r"\b(?:LDL|STL)\b", sass)),
            "instr": len(re.findall(r"^\s+/\*[0-9a-f]{4,}\*/", sass, re.M))}


def fp8_forms(rows, nks):
    for N, K in nks:
        for M in rows:
            kernel, kp = gemm_fp8.kernel_of(gemm_fp8.policy(M, N, K))
            yield f"fp8 {M}x{N}x{K}", kernel, kp


def bf16_forms(rows, nks):
    for N, K in nks:
        for M in rows:
            p = gemm_hopper.policy(M, N, K, tp.bf16, fixup=True)
            kernel, kp = gemm_hopper.plan_kernel(M, N, tp.bf16, p, K)
            yield f"bf16 {M}x{N}x{K}", kernel, kp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="*", default=[16, 32, 64, 96, 128, 192, 256])
    ap.add_argument("--nk", nargs="*", default=["4096,4096", "4096,14336", "14336,4096"])
    ap.add_argument("--bf16", action="store_true", help="the bf16 policy's kernels (16 / 32 / 96 rows) instead")
    a = ap.parse_args()
    nks = [tuple(int(x) for x in s.split(",")) for s in a.nk]
    forms = bf16_forms(a.rows if a.rows != ap.get_default("rows") or not a.bf16 else [16, 32, 96], nks) \
        if a.bf16 else fp8_forms(a.rows, nks)
    for name, kernel, kp in forms:
        off, on = measure(toggled(kernel, False), kp), measure(toggled(kernel, True), kp)
        d = (on["instr"] - off["instr"]) / off["instr"]
        print(f"{name:22} {kernel.name:18} {short(kp):75} off regs {off['regs']:3} spill {off['spill']} "
              f"ldst {off['ldst']} instr {off['instr']:5} | on regs {on['regs']:3} spill {on['spill']} ldst "
              f"{on['ldst']} instr {on['instr']:5} ({d:+.1%})", flush=True)


if __name__ == "__main__":
    main()
