"""H1: build benchmarks/gemm.py's table kernels on the host (no GPU) into $TILEPY_HIP_CACHE, to carry to the device
machine so that its call spends its seconds timing, not compiling (the cache key holds the source file's path: build
from the repo root the device machine uses). The kernels each row compiles by name: gemm_hopper's policy (bf16 and
f32 out), gemm_fp32's form as fp32_row builds it (and the split passes), gemm_fp8's policy.

    TILEPY_HIP_CACHE=DIR python benchmarks/profile/h1_prebuild.py M,N,K ...
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def build(item):
    import tilepy as tp
    import tilepy_hip
    from stdlib_kernels import gemm_fp8, gemm_fp32, gemm_hopper

    kind, (M, N, K) = item
    t = time.time()
    if kind in ("bf16", "f32"):
        o = tp.bf16 if kind == "bf16" else tp.f32
        p = gemm_hopper.policy(M, N, K, o, fixup=True)
        kernel, kp = gemm_hopper.plan_kernel(M, N, o, p, K)
        tilepy_hip.compile(kernel, target="sm_90a", **kp)
    elif kind == "fp8":
        kernel, kp = gemm_fp8.kernel_of(gemm_fp8.policy(M, N, K))
        tilepy_hip.compile(kernel, target="sm_90a", **kp)
    elif kind == "fp32":        # benchmarks/gemm.py fp32_row, b_layout "kn", no swap (M > SWAP_ROWS)
        c = {**gemm_fp32.launch_policy(M, N, K)}
        raw = int(gemm_fp32.raw_ok(K) and c.get("PROMOTE", True))
        p = {**gemm_fp32.PRESETS["sm_90a"], **(gemm_fp32.RAW if raw else {}), **c}
        tilepy_hip.compile(gemm_fp32.gemm_fp32, target="sm_90a", **p)
    else:                       # the split passes (no constexprs)
        tilepy_hip.compile(getattr(gemm_fp32, kind), target="sm_90a")
    return kind, (M, N, K), time.time() - t


def main():
    shapes = [tuple(int(x) for x in s.split(",")) for s in sys.argv[1:]]
    items = [(k, s) for s in shapes for k in ("fp32", "bf16", "f32", "fp8")]
    items += [("split_tf32", (0, 0, 0)), ("split_tf32_t", (0, 0, 0))]
    with ProcessPoolExecutor(8) as ex:
        for kind, shape, dt in ex.map(build, items):
            print(f"{kind:12s} {shape} {dt:6.1f} s", flush=True)


if __name__ == "__main__":
    main()
