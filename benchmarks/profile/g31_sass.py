"""G31: registers, spills and the SASS (HGMMA, LDL / STL) of gemm_hopper.launch's gemm_hopper / gemm_splitk /
gemm_cluster policy forms with TMA_ONLY=1 (the operands' copies without the per-element fallback) and without, for
sm_90a (compiles on the host: nvcc + cuobjdump, no GPU needed)."""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import tilepy as tp  # noqa: E402
import tilepy_hip  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402

SHAPES = [(512, 512, 512), (768, 768, 768), (1024, 1024, 1024), (2048, 2048, 1024), (2048, 512, 4096),
          (1000, 1000, 4096), (3000, 5000, 4096), (2051, 2045, 1000), (16, 14336, 4096), (48, 1024, 4096),
          (200, 2048, 4096), (4096, 4104, 4096)]


def facts(kernel, kp):
    ck = tilepy_hip.compile(kernel, target="sm_90a", **kp)
    sass = ck.sass()
    mma = sorted(set(re.findall(r"\bHGMMA\.[\w.]+", sass)))
    res = ck.resources
    ldl = bool(re.search(r"\b(LDL|STL)\b", sass))
    return res.get("registers"), res.get("spills", res.get("spill_stores")), mma, ldl


def main():
    shapes = [tuple(int(x) for x in s.split(",")) for s in sys.argv[1:]] or SHAPES
    for shape in shapes:
        for out in (tp.bf16, tp.f32):
            p = gemm_hopper.policy(*shape, out, fixup=True)
            if "TMA_ONLY" not in p:
                print(shape, out, "not a TMA_ONLY form (swap-AB / persistent)", flush=True)
                continue
            kernel, kp = gemm_hopper.plan_kernel(shape[0], shape[1], out, p, shape[2])
            r1 = facts(kernel, kp)
            r0 = facts(kernel, {**kp, "TMA_ONLY": 0})
            form = " ".join(f"{k}={kp[k]}" for k in ("BM", "BN", "STAGES", "CONSUMERS", "SPLIT_K", "FIXUP", "CLUSTER_M",
                                                       "EPILOGUE", "MIN_BLOCKS", "CONSUMER_REGS") if k in kp)
            print(f"{shape} {out} {getattr(kernel, 'name', kernel)} {form} | fallback: regs {r0[0]} spills {r0[1]} "
                  f"LDL/STL {r0[3]} | TMA_ONLY: regs {r1[0]} spills {r1[1]} LDL/STL {r1[3]} {r1[2]}", flush=True)


if __name__ == "__main__":
    main()
