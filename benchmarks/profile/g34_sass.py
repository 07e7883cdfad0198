"""G34: registers, spills, the QGMMA instruction, LDL / STL and the epilogue's instructions (STG / STS / STAS / the
TMA store) of g34_forms.call1_variants at 16-256 x 4096 x 4096, and tilepy-verify on each (time, findings); sm_90a,
compiled on the host.

    python benchmarks/profile/g34_sass.py [ROWS ...]
"""

import collections
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from g34_forms import call1_variants  # noqa: E402

import tilepy_hip  # noqa: E402
import tilepy_verify as tv  # noqa: E402
from stdlib_kernels import gemm_fp8  # noqa: E402

KEYS = ("BM", "BN", "STAGES", "CLUSTER_K", "K_WAYS", "TMA_ONLY", "HALF_SUM", "STORE_T")
NK = [int(x) for x in (sys.argv[1] if sys.argv[1:2] and "," in sys.argv[1] else "4096,4096").split(",")]
ROWS = [int(x) for x in sys.argv[1:] if "," not in x] or (16, 32, 64, 96, 128, 192, 256)

for M in ROWS:
    for tag, p in call1_variants(M, *NK).items():
        kernel, kp = gemm_fp8.kernel_of(p)
        ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
        sass = ck.sass()
        mma = sorted(set(re.findall(r"\bQGMMA\.[\w.]+", sass)))
        ops = collections.Counter(m.split(".")[0] for m in re.findall(r"\b(STG\.[\w.]+|STS\.[\w.]+|STAS\w*|UTMASTG\w*|"
                                                                       r"UBLKCP\w*|MEMBAR\.[\w.]+)", sass))
        t = time.process_time()
        rep = tv.verify(kernel, target="sm_90a", **kp)
        t = time.process_time() - t
        print(M, tag, {k: kp[k] for k in KEYS}, "|", mma, "| LDL/STL:", bool(re.search(r"\b(LDL|STL)\b", sass)),
              "|", dict(ops), "| regs", ck.resources["registers"], "smem", ck.resources["dynamic_smem"], "| verify",
              "clean" if rep.ok and not rep.findings else f"FINDINGS {rep}", f"{t:.2f} s", flush=True)
