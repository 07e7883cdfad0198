"""G20: registers, spills and the SASS's matrix instructions / local memory of the two swap-AB forms (gemm_fp8_swap at
its table's BM 16 / 128 rows, gemm_fp32_ct at BN 16 / 128), built for sm_90a."""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp8, gemm_fp32  # noqa: E402

for name, kernel, params in (
        ("fp8 swap 16x4096x4096", *gemm_fp8.kernel_of(gemm_fp8.swap_params(16, 4096, 4096))),
        ("fp8 swap 128x4096x4096", *gemm_fp8.kernel_of(gemm_fp8.swap_params(128, 4096, 4096))),
        ("fp32 swap 16x4096x4096", gemm_fp32.gemm_fp32_ct, gemm_fp32.swap_params(16, 4096, 4096)),
        ("fp32 swap 128x4096x4096", gemm_fp32.gemm_fp32_ct, gemm_fp32.swap_params(128, 4096, 4096))):
    ck = tilepy_hip.compile(kernel, target="sm_90a", **params)
    sass = ck.sass()
    mma = sorted(set(re.findall(r"\b[QH]GMMA\.[\w.]+", sass)))
    print(name, "|", mma, "| LDL/STL:", bool(re.search(r"\b(LDL|STL)\b", sass)), "|", ck.resources, flush=True)
