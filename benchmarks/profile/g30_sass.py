"""G30: registers, spills and the SASS of the 256-row policy form of gemm_fp8_swap (two whole 128-row tiles over
64-column tiles, one consumer, no K split, 9 stages): the QGMMA instruction, no LDL / STL; for sm_90a."""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp8  # noqa: E402

for name, shape in (("256x4096x4096 policy (whole 128-row tiles, unsplit)", (256, 4096, 4096)),):
    kernel, kp = gemm_fp8.kernel_of(gemm_fp8.policy(*shape))
    ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
    sass = ck.sass()
    mma = sorted(set(re.findall(r"\bQGMMA\.[\w.]+", sass)))
    print(name, {k: kp[k] for k in ("BM", "BN", "STAGES", "SPLIT_K", "CLUSTER_K", "K_WAYS", "CLUSTER_M")}, "|", mma,
          "| LDL/STL:", bool(re.search(r"\b(LDL|STL)\b", sass)), "|", ck.resources, flush=True)
