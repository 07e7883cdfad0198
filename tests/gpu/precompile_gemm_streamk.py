"""Build the kernels of tests/gpu/run_gemm_streamk.sh into the on-disk cache in parallel processes (gemm_streamk's
presets and gemm_hopper's policy kernels of the benchmark shapes, f32 and bf16 out), so the tests and the
benchmark find them built.  python3 tests/gpu/precompile_gemm_streamk.py [workers]"""

import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import tilepy as tp  # noqa: E402
from stdlib_kernels import gemm_hopper  # noqa: E402
from stdlib_kernels import gemm_streamk as sk  # noqa: E402

# tests/gpu/test_gpu_gemm_streamk.py's CASES and tests/gpu/sanitize_gemm_streamk.py's (M, N, K, preset, grid cap)
CASES = [(16, 4096, 4096, "narrow", 132), (64, 1024, 2048, "narrow", 132), (130, 1000, 1032, "wide", 132),
         (256, 4096, 4096, "wide", 132), (1024, 1024, 1024, "narrow", 132), (300, 264, 520, "narrow", 7),
         (1000, 1000, 200, "wide", 132), (100, 264, 520, "narrow", 5), (200, 136, 200, "wide", 3),
         (70, 128, 1000, "narrow", 7), (130, 1000, 1032, "narrow", 132)]
SHAPES = [(16, 4096, 4096), (64, 4096, 4096), (128, 4096, 4096), (256, 4096, 4096), (128, 14336, 4096),
          (1024, 1024, 1024), (3000, 5000, 4096), (4096, 4096, 4096)]


def build(item):
    import tilepy_hip

    mod, out, params = item
    try:
        if mod == "sk":
            tilepy_hip.compile(sk.KERNELS[out], target="sm_90a", **params)
        else:
            pad_a, pad_b, split = params.pop("_pad")
            kern = gemm_hopper.kernel_for(tp.f32 if split else out, pad_a, pad_b, False)
            tilepy_hip.compile(kern, target="sm_90a", **gemm_hopper.kernel_params(params))
    except Exception as e:  # noqa: BLE001 - reported below
        return f"{type(e).__name__}: {e}"[:200]
    return None


def items():
    """What the GPU tests and benchmarks/gemm.py --streamk launch: each preset per shape (its own grid, the grid
    of whole splits, FIXUP=0) and gemm_hopper's policy."""
    out = {}
    calls = [(M, N, K, p, 132) for M, N, K in SHAPES for p in sk.PRESETS] + CASES
    for M, N, K, name, sms in calls:
        p = sk.PRESETS[name]
        tiles = -(-M // p["BM"]) * -(-N // p["BN"])
        aligned = {"num_sms": tiles * (sms // tiles)} if tiles < sms else {}
        for extra in ({}, {"FIXUP": 0} if p.get("FIXUP", 1) else {}, aligned, {"FIXUP": 2}, {**aligned, "FIXUP": 2},
                      {"MAX_PARTS": 0} if p.get("FIXUP", 1) == 1 else {}):
            q = {**p, **extra}
            params, _ = sk.plan_params(M, N, K, q.pop("num_sms", sms), **q)
            for o in (tp.f32,) if params.get("FIXUP", 1) == 2 else (tp.f32, tp.bf16):
                out[(o, tuple(sorted((k, repr(v)) for k, v in params.items())))] = ("sk", o, params)
    out = list(out.values())
    for M, N, K in SHAPES:
        for o in (tp.f32, tp.bf16):
            p = gemm_hopper.policy(M, N, K, o)
            out.append(("gh", o, {**p, "_pad": ((2 * K) % 16 != 0, (2 * N) % 16 != 0, p.get("SPLIT_K", 1) > 1)}))
    return out


if __name__ == "__main__":
    t = time.time()
    todo = items()
    with ProcessPoolExecutor(int(sys.argv[1]) if len(sys.argv) > 1 else 16,
                             mp_context=multiprocessing.get_context("spawn")) as ex:
        errs = [e for e in ex.map(build, todo) if e]
    print(f"precompiled {len(todo)} kernels in {time.time() - t:.1f} s; errors: {errs[:3]}", flush=True)
