"""Build every attention kernel variant that the GPU tests, the sanitizer script, the benchmark (table and sweep)
and the ablation launch, in parallel processes, into the on-disk cache ($TILEPY_HIP_CACHE), so that one device
call spends its time running kernels rather than compiling them one after another:

    python3 tests/gpu/precompile_attention.py [workers] [--decode]
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
    from stdlib_kernels import attention

    out = []
    for d in (64, 128):
        for causal in (False, True):
            for group in (1, 2, 4):
                for sq in (512, 4096):
                    out.append(("attention_fwd", {**attention.policy(d, sq, causal), "GROUP": group}))
                out.append(("attention_fwd", {**attention.PRESETS[d], "CAUSAL": causal, "GROUP": group}))
            out.append(("attention_fwd", {**attention.PRESETS[d], "CAUSAL": causal, "PIPELINE": False}))
            if d == 64:  # (three consumers' Q and 3 stages of K / V at d = 128 exceed a block's shared memory)
                out.append(("attention_fwd", {**attention.PRESETS[d], "CAUSAL": causal, "GROUP": 1,
                                              **attention.THREE_CONSUMERS}))
        for qlen, causal in ((1, False), (4, True), (4, False)):
            for kern in ("attention_decode", "attention_decode_bf16"):   # (bf16: one split, no merge)
                out.append((kern, dict(HEAD_DIM=d, BN=128, STAGES=attention.DECODE_STAGES[d], CONSUMERS=1,
                                       QLEN=qlen, CAUSAL=causal)))
        out.append(("attention_merge", dict(HEAD_DIM=d)))
        for splits in (2, 3, 4, 8):                  # decode's merges (every split at once), 4 and 16 rows
            for rows in (4, 16):
                out.append(("attention_merge", attention.merge_params(splits, rows, d)))
        for ring in ({64: dict(STAGES=6), 128: dict(BN=64, STAGES=6)}[d], dict(BN=64, STAGES=6)):
            for kern in ("attention_decode", "attention_decode_bf16"):   # benchmarks/attention.py's rings
                out.append((kern, {**dict(HEAD_DIM=d, BN=128, STAGES=attention.DECODE_STAGES[d], CONSUMERS=1,
                                          QLEN=1, CAUSAL=False), **ring}))
    for d, cfg in ((64, dict(PAIRED=True, PIPELINE=False)), (64, dict(attention.THREE_CONSUMERS, PAIRED=True)),
                   (128, dict(PAIRED=True, PIPELINE=False, STAGES=2))):   # PAIRED: GPU tests and sanitizer
        for causal in (False, True):
            for group in (1, 2):
                out.append(("attention_fwd", {**attention.PRESETS[d], **cfg, "CAUSAL": causal, "GROUP": group}))
    try:
        import attention as bench  # benchmarks/attention.py: the sweep's variants
        for _, _, _, params in bench.sweep_variants():
            out.append(("attention_fwd", params))
    except ImportError:
        pass
    import ablation_attention
    for _, extra in ablation_attention.STEPS:
        if extra is not None:
            out.append(("attention_fwd", {**attention.PRESETS[128], **extra, "CAUSAL": False, "GROUP": 1}))
    out.append(("ablation:attention_naive", dict(HEAD_DIM=128, GROUP=1)))
    seen, uniq = set(), []
    for name, params in out:
        key = (name, tuple(sorted(params.items())))
        if key not in seen:
            seen.add(key)
            uniq.append((name, params))
    return uniq


def build(item):
    import tilepy_hip
    from stdlib_kernels import attention

    name, params = item
    if name.startswith("ablation:"):
        import ablation_attention
        kernel = getattr(ablation_attention, name.split(":")[1])
    else:
        kernel = getattr(attention, name)
    t0 = time.time()
    try:
        ck = tilepy_hip.compile(kernel, target="sm_90a", **params)
        return f"{time.time() - t0:5.1f} s {name} {params} regs {ck.resources.get('registers')}"
    except Exception as e:  # reported, and the run goes on: the test that launches it shows the error again
        return f"FAILED {name} {params}: {type(e).__name__}: {str(e).splitlines()[0][:200]}"


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--decode"]
    workers = int(args[0]) if args else min(16, os.cpu_count() or 1)
    items = variants()
    if "--decode" in sys.argv:      # the decode kernels alone
        items = [it for it in items if it[0].startswith(("attention_decode", "attention_merge"))]
    t0 = time.time()
    with ProcessPoolExecutor(workers) as ex:
        for line in ex.map(build, items):
            print(line, flush=True)
    print(f"{len(items)} kernels in {time.time() - t0:.1f} s with {workers} processes")
