"""G21: registers, spills and the SASS of gemm_fp8_swap's CLUSTER_K forms (the split summed in the kernel over a
cluster by st.async): the QGMMA instruction, STAS (st.async) present, no LDL / STL, no MEMBAR.ALL.GPU; for sm_90a."""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp8  # noqa: E402

for name, shape, kw in (("16x4096x4096 CK4", (16, 4096, 4096), {}), ("64x4096x4096 CK4", (64, 4096, 4096), {}),
                        ("16x4096x4096 BN64 CK2", (16, 4096, 4096), dict(BN=64)),
                        ("128x4096x4096 BN64 CK2", (128, 4096, 4096), dict(BN=64)),
                        ("256x4096x4096 CK2", (256, 4096, 4096), {})):
    kernel, kp = gemm_fp8.kernel_of(gemm_fp8.swap_params(*shape, cluster=4, **kw))
    ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
    sass = ck.sass()
    mma = sorted(set(re.findall(r"\bQGMMA\.[\w.]+", sass)))
    print(name, "CLUSTER_K", kp["CLUSTER_K"], "STAGES", kp["STAGES"], "|", mma,
          "| STAS:", len(re.findall(r"\bSTAS\b", sass)),
          "| LDL/STL:", bool(re.search(r"\b(LDL|STL)\b", sass)), "| MEMBAR.ALL.GPU:", "MEMBAR.ALL.GPU" in sass,
          "|", ck.resources, flush=True)
