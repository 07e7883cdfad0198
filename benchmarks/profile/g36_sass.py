"""G36: registers, spills, matrix instructions and local memory in the k-loop of the gemm_fp32 forms launch takes
after G36 (launch_policy's 128 x 96 / 128 x 64 TMA_ONLY tiles, the "kn" swap form with TMA_ONLY), built for sm_90a
on the host. "loop LDL/STL" counts local-memory instructions from 300 lines before the consumers' first HGMMA to
their last (the k-loop); spills after it are the store's epilogue."""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp32  # noqa: E402

LOCAL = re.compile(r"\b(LDL|STL)\b")


def report(name, kernel, params):
    ck = tilepy_hip.compile(kernel, target="sm_90a", **params)
    lines = ck.sass().splitlines()
    mma_at = [i for i, ln in enumerate(lines) if "HGMMA" in ln]
    loop = lines[max(0, mma_at[0] - 300):mma_at[-1]] if mma_at else []
    mma = sorted({m for ln in lines for m in re.findall(r"\bHGMMA\.[\w.]+", ln)})
    in_loop = sum(bool(LOCAL.search(ln)) for ln in loop)
    in_all = sum(bool(LOCAL.search(ln)) for ln in lines)
    print(f"{name}: BM {params['BM']} BN {params['BN']} TMA_ONLY {params.get('TMA_ONLY', 0)} | {mma} | loop LDL/STL "
          f"{in_loop} | all LDL/STL {in_all} | registers {ck.resources.get('registers')} spill stores "
          f"{ck.resources.get('spill_stores')}", flush=True)


base = {**gemm_fp32.PRESETS["sm_90a"], **gemm_fp32.RAW}
for M, N, K in ((2051, 2045, 1000), (1024, 1024, 1024), (4096, 4096, 4096)):
    report(f"gemm_fp32 {M}x{N}x{K}", gemm_fp32.gemm_fp32, {**base, **gemm_fp32.launch_policy(M, N, K)})
for rows in (16, 64, 128, 256):
    report(f"gemm_fp32_kt {rows} rows", gemm_fp32.gemm_fp32_kt, gemm_fp32.swap_params(rows, 4096, 4096, b_layout="kn"))
