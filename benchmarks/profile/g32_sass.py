"""G32: registers, spills, the QGMMA instruction and LDL / STL of gemm_fp8_swap's CLUSTER_M=2 + TMA_ONLY forms
(g32_forms.call1_variants) at 32-192 x 4096 x 4096, and tilepy-verify on each (time, findings); for sm_90a."""

import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from g32_forms import call1_variants  # noqa: E402

import tilepy_hip  # noqa: E402
import tilepy_verify as tv  # noqa: E402
from stdlib_kernels import gemm_fp8  # noqa: E402

for M in [int(x) for x in sys.argv[1:]] or (32, 64, 96, 128, 192):
    for tag, p in call1_variants(M, 4096, 4096).items():
        kernel, kp = gemm_fp8.kernel_of(p)
        ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
        sass = ck.sass()
        mma = sorted(set(re.findall(r"\bQGMMA\.[\w.]+", sass)))
        t = time.process_time()
        rep = tv.verify(kernel, target="sm_90a", **kp)
        t = time.process_time() - t
        print(M, tag, {k: kp[k] for k in ("BM", "BN", "STAGES", "CLUSTER_K", "K_WAYS", "CLUSTER_M", "TMA_ONLY")}, "|",
              mma, "| LDL/STL:", bool(re.search(r"\b(LDL|STL)\b", sass)), "|", ck.resources, "| verify",
              "clean" if rep.ok and not rep.findings else f"FINDINGS {rep}", f"{t:.2f} s", flush=True)
