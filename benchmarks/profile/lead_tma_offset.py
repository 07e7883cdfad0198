"""Does a bulk tensor copy (TMA) fault when its innermost start coordinate is not a 16-byte multiple? One kernel per
direction (tests/hip/kernels.py load_at / store_at: copy_bulk into shared then a register store; a register load into
shared then store_bulk), column start C0 a constexpr (load_dyn / store_dyn: the block's column, a run-time start), each
case in its own process (a fault ends the CUDA context). H100 only. Measured before the render's start guard: loads and
stores at 2, 8 and 10 bytes died with an illegal instruction (the stores in the row-class attempt, the loads here);
with the guard every case is exact.

    python3 benchmarks/profile/lead_tma_offset.py            # every case, in subprocesses
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "tests" / "hip"))

from kernels import load_at, load_dyn, store_at, store_dyn  # noqa: E402

import tilepy_hip  # noqa: E402,F401  (the GPU backend)


def one(kind: str, c0: int) -> str:
    import torch

    x = torch.randn(128, 256, device="cuda").bfloat16()
    y = torch.zeros_like(x)
    if kind.endswith("dyn"):       # blocks at every first column 0 .. c0
        (load_dyn if kind == "load_dyn" else store_dyn)[(2, c0 + 1)](x, y, target="sm_90a")
        torch.cuda.synchronize()
        return "exact" if torch.equal(y[:, :c0 + 64], x[:, :c0 + 64]) and not y[:, c0 + 64:].any() else "WRONG"
    (load_at if kind == "load" else store_at)[(2,)](x, y, target="sm_90a", C0=c0)
    torch.cuda.synchronize()
    ok = torch.equal(y[:, c0:c0 + 64], x[:, c0:c0 + 64]) and not y[:, :c0].any() and not y[:, c0 + 64:].any()
    return "exact" if ok else "WRONG"


if __name__ == "__main__":
    if len(sys.argv) == 3:
        print(one(sys.argv[1], int(sys.argv[2])), flush=True)
        sys.exit(0)
    for kind in ("load", "store", "load_dyn", "store_dyn"):
        for c0 in ((0, 8, 1, 4, 5) if kind in ("load", "store") else (0, 9)):
            r = subprocess.run([sys.executable, __file__, kind, str(c0)], capture_output=True, text=True, timeout=120)
            last = (r.stdout.strip().splitlines() or [""])[-1]
            err = [ln for ln in r.stderr.splitlines() if "Error" in ln or "error" in ln][-1:] if r.returncode else []
            print(f"{kind:5s} C0={c0} ({c0 * 2} bytes): rc={r.returncode} {last} {' '.join(err)[:160]}", flush=True)
