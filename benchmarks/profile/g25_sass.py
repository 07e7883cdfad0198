"""G25: registers, spills, matrix instructions and local memory in the k-loop of gemm_fp32_kt (the "kn" swap form)
at its table's column tiles, built for sm_90a. "loop LDL/STL" counts local-memory instructions between the
consumers' first and last HGMMA (the k-loop); spills after it are the transposed store's epilogue."""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp32  # noqa: E402

LOCAL = re.compile(r"\b(LDL|STL)\b")

for rows, form in ((16, 1), (32, 1), (64, 1), (128, 1), (1024, 1), (16, 2), (64, 2), (128, 2), (256, 2)):
    nk = 4096 if rows < 1024 else 1024
    params = gemm_fp32.swap_params(rows, nk, nk, b_layout="kn", kn_form=form)
    ck = tilepy_hip.compile(gemm_fp32.gemm_fp32_kt, target="sm_90a", **params)
    lines = ck.sass().splitlines()
    mma_at = [i for i, ln in enumerate(lines) if "HGMMA" in ln]
    loop = lines[mma_at[0] - 300:mma_at[-1]] if mma_at else []
    mma = sorted({m for ln in lines for m in re.findall(r"\bHGMMA\.[\w.]+", ln)})
    in_loop = sum(bool(LOCAL.search(ln)) for ln in loop)
    in_all = sum(bool(LOCAL.search(ln)) for ln in lines)
    print(f"kt form {form} {rows} rows BN {params['BN']} KSPLIT {params.get('KSPLIT', 1)} | {mma} | loop LDL/STL "
          f"{in_loop} | "
          f"all LDL/STL {in_all} | {ck.resources}", flush=True)
