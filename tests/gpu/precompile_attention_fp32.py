"""Build every fp32 attention variant the GPU tests, the sanitizer script and the benchmark (with its sweep)
launch, and the TF32 split kernels, in parallel processes into the on-disk cache ($TILEPY_HIP_CACHE), so that
one device call runs kernels rather than compiling them one after another:

    python3 tests/gpu/precompile_attention_fp32.py [workers]
"""

import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))


def variants():
    """(kernel name, constexprs) of every variant, deduplicated."""
    import attention_fp32 as bench  # benchmarks/attention_fp32.py

    from stdlib_kernels import attention_fp32

    out = [("split_tf32", {}), ("split_tf32_t", {})]
    for d in attention_fp32.HEAD_DIMS:
        for causal in (False, True):
            for group in (1, 2, 4):
                out.append(("attention_fp32", {**attention_fp32.policy(d, 1024, causal), "GROUP": group}))
                out.append(("attention_fp32", {**attention_fp32.policy(d, 1024, causal), "GROUP": group,
                                               "PROMOTE": True}))
                out.append(("attention_fp32", {**attention_fp32.policy(d, 1024, causal), "GROUP": group,
                                               "PIECES": True}))
    for d, causal, cfg in ((64, True, dict(STAGES=3, PBUF=1)), (64, False, dict(CONSUMERS=1, STAGES=4))):
        out.append(("attention_fp32", {**attention_fp32.policy(d, 1024, causal), "GROUP": 1, **cfg}))
        out.append(("attention_fp32", {**attention_fp32.policy(d, 1024, causal), "GROUP": 2, **cfg}))
    for _, b, h, hkv, s, d, causal in bench.ROWS:
        for cfg in bench.SWEEP.get(d, []):
            out.append(("attention_fp32", {**attention_fp32.policy(d, s, causal), "GROUP": h // hkv, **cfg}))
    seen, uniq = set(), []
    for name, params in out:
        key = (name, tuple(sorted(params.items())))
        if key not in seen:
            seen.add(key)
            uniq.append((name, params))
    return uniq


def build(item):
    import tilepy_hip
    from stdlib_kernels import attention_fp32, gemm_fp32

    name, params = item
    kernel = getattr(attention_fp32 if name == "attention_fp32" else gemm_fp32, name)
    t0 = time.time()
    try:
        ck = tilepy_hip.compile(kernel, target="sm_90a", **params)
        return f"{time.time() - t0:5.1f} s {name} {params} regs {ck.resources.get('registers')}"
    except Exception as e:  # reported, and the run goes on: the test that launches it shows the error again
        return f"FAILED {name} {params}: {type(e).__name__}: {str(e).splitlines()[0][:200]}"


if __name__ == "__main__":
    workers = int(sys.argv[1]) if len(sys.argv) > 1 else min(16, os.cpu_count() or 1)
    items = variants()
    t0 = time.time()
    with ProcessPoolExecutor(workers) as ex:
        for line in ex.map(build, items):
            print(line, flush=True)
    print(f"{len(items)} kernels in {time.time() - t0:.1f} s with {workers} processes")
