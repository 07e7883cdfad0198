"""G24: registers, spills and the SASS of gemm_fp8_swap's K_WAYS=2 forms (two consumers on one 64-column tile) and the
rows' own BM (e4m3 n24 / n48 / n96), and CLUSTER_M=2 (the rows over a cluster, B multicast): the QGMMA instruction, no
LDL / STL; for sm_90a."""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_fp8  # noqa: E402

for name, shape, kw in (("16x4096x4096 K_WAYS2 CK2", (16, 4096, 4096), dict(k_ways=2, cluster=2)),
                        ("128x4096x4096 K_WAYS2 CK2", (128, 4096, 4096), dict(k_ways=2, cluster=2)),
                        ("256x4096x14336 K_WAYS2", (256, 4096, 14336), dict(k_ways=2)),
                        ("16x4096x4096 K_WAYS2 slots", (16, 4096, 4096), dict(k_ways=2)),
                        ("24x4096x4096 BM24 CK2", (24, 4096, 4096), dict(BM=24, BN=64, cluster=2)),
                        ("48x4096x4096 BM48 K_WAYS2 CK2", (48, 4096, 4096), dict(BM=48, k_ways=2, cluster=2)),
                        ("96x4096x4096 BM96 CK2", (96, 4096, 4096), dict(BM=96, BN=64, cluster=2)),
                        ("16x4096x4096 CM2 BM8", (16, 4096, 4096), dict(BN=64, cluster_m=2)),
                        ("16x4096x4096 CM2 BM8 K_WAYS2", (16, 4096, 4096), dict(k_ways=2, cluster_m=2)),
                        ("128x4096x4096 CM2 BM64 K_WAYS2", (128, 4096, 4096), dict(k_ways=2, cluster_m=2))):
    kernel, kp = gemm_fp8.kernel_of(gemm_fp8.swap_params(*shape, **kw))
    ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
    sass = ck.sass()
    mma = sorted(set(re.findall(r"\bQGMMA\.[\w.]+", sass)))
    print(name, {k: kp[k] for k in ("BM", "BN", "STAGES", "SPLIT_K", "CLUSTER_K", "K_WAYS", "CLUSTER_M")}, "|", mma,
          "| LDL/STL:", bool(re.search(r"\b(LDL|STL)\b", sass)), "|", ck.resources, flush=True)
