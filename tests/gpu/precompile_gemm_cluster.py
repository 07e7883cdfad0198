"""Build every gemm_cluster kernel the GPU tests, the sanitizer script and benchmarks/gemm_cluster.py launch, in
parallel processes, into $TILEPY_HIP_CACHE (the device call then finds them cached).

python3 tests/gpu/precompile_gemm_cluster.py [workers]
"""

import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))


def items():
    from test_gpu_gemm_cluster import CASES

    import tilepy as tp
    from stdlib_kernels import gemm_hopper

    out = []
    for p in CASES.values():
        for dt in (tp.f32, tp.bf16):
            if dt == tp.f32 and p.get("EPILOGUE") == 2:
                continue
            out.append((dt, {**gemm_hopper.PRESETS["sm_90a"], **p}))
    for p in (dict(CLUSTER_M=2, STAGES=3, **gemm_hopper.SMALL_TILE), dict(CLUSTER_M=2, STAGES=3)):
        out.append((tp.f32, {**gemm_hopper.PRESETS["sm_90a"], **p, "EPILOGUE": 0}))
        out.append((tp.bf16, {**gemm_hopper.PRESETS["sm_90a"], **p, "EPILOGUE": 2}))
    return out


def build(item):
    import tilepy_hip
    from stdlib_kernels import gemm_hopper

    dt, p = item
    try:
        tilepy_hip.compile(gemm_hopper.kernel_for(dt, cluster=True), target="sm_90a", **gemm_hopper.kernel_params(p))
    except Exception as e:  # noqa: BLE001 - reported
        return f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    return None


if __name__ == "__main__":
    t = time.time()
    todo = items()
    with ProcessPoolExecutor(int(sys.argv[1]) if len(sys.argv) > 1 else 8,
                             mp_context=multiprocessing.get_context("spawn")) as ex:
        errs = [e for e in ex.map(build, todo) if e]
    print(f"precompiled {len(todo)} gemm_cluster kernels in {time.time() - t:.1f} s; failed: {errs}", flush=True)
