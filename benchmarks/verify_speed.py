"""Verify time of every stdlib kernel (each GEMM preset), cold (fresh IR, no verifier cache).

    python benchmarks/verify_speed.py [--repeat 3]
    python benchmarks/verify_speed.py --stages [--repeat 1]   # the ring kernels at STAGES 2, 3, 4, 6, 8

Prints one line per kernel: kernel, target, best-of-N seconds, SMT queries, findings, then the slowest. The
issue's budget is < 2 s per kernel on 2 CPU cores. Besides the stdlib, the three-stage rolling-window tag
proof of tests/verify/window_kernels.py (issue 17: 7.9 s before per-read summaries)."""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import stdlib_kernels  # noqa: E402
import tilepy  # noqa: E402
import tilepy as tp  # noqa: E402
import tilepy_verify  # noqa: E402
from stdlib_kernels import (  # noqa: E402
    attention,
    conv,
    conv_igemm,
    gemm,
    gemm_fp8,
    gemm_fp32,
    gemm_hopper,
    moe,
    rmsnorm,
    softmax,
    vector_add,
)
from tests.verify.window_kernels import window3  # noqa: E402


def cases():
    """(name, kernel, target, constexprs) for every stdlib kernel: each preset table entry (gemm, gemm_hopper and
    its policy() classes, attention head dims causal or not and decode, conv per target, the TF32 GEMMs, the MoE
    GEMMs' tile sets), then every other kernel at its default constexprs."""
    seen = set()

    def mark(*ks):
        seen.update(ks)

    for target, params in gemm.PRESETS.items():
        yield f"gemm[{target}]", gemm.gemm, target, params
    for target, params in gemm_hopper.PRESETS.items():
        yield f"gemm_hopper[{target}]", gemm_hopper.gemm_hopper, target, params
        yield f"gemm_hopper[{target}, 128x128]", gemm_hopper.gemm_hopper, target, {**params, **gemm_hopper.SMALL_TILE}
    for cls in gemm_hopper.POLICIES:  # the policy table's classes (wait_group 1, 6 stages, split-K)
        M, N, K = {"large": (4096,) * 3, "small": (1024,) * 3, "skinny": (128, 4096, 4096),
                   "decode": (16, 4096, 4096), "unaligned": (2051, 2045, 1000)}[cls]
        yield f"gemm_hopper[policy {cls}]", gemm_hopper.gemm_hopper, "sm_90a", gemm_hopper.policy(M, N, K)
        if cls in gemm_hopper.BF16_OUT:  # the bf16-output entries (the staged epilogue)
            yield (f"gemm_hopper_bf16[policy {cls}]", gemm_hopper.gemm_hopper_bf16, "sm_90a",
                   gemm_hopper.policy(M, N, K, tp.bf16))
    # the persistent grid: nested tile x ring loops (the verifier writes them as one slot loop) and its flat twin
    for k in (gemm_hopper.gemm_persistent, gemm_hopper.gemm_persistent_flat):
        yield f"{k.name}[sm_90a]", k, "sm_90a", {}
        yield f"{k.name}[sm_90a, 128x128 s5]", k, "sm_90a", {**gemm_hopper.SMALL_TILE, "STAGES": 5}
    # launch's large bf16 class: gemm_persistent with the TMA store overlapped with the next tile (per-tile
    # handshakes on `staged` / `c_free`: tilepy_verify/periodic.py)
    kern, params = gemm_hopper.plan_kernel(4096, 4096, tp.bf16, gemm_hopper.policy(4096, 4096, 4096, tp.bf16,
                                                                                     fixup=True), 4096)
    yield "gemm_persistent_bf16[policy large, TMA store]", kern, "sm_90a", params
    # and its f32 output (G18): 4 pieces of 64 columns through one buffer
    kern, params = gemm_hopper.plan_kernel(4096, 4096, tp.f32, gemm_hopper.policy(4096, 4096, 4096, tp.f32,
                                                                                    fixup=True), 4096)
    yield "gemm_persistent[policy large f32, TMA store]", kern, "sm_90a", params
    # launch's small class in relaxed 2x1 clusters (G22: gemm_cluster RELAXED=1, the producer's tail as its close):
    # f32 out on 64 x 128 tiles, bf16 out on 64 x 64 tiles through the TMA store
    for shape, out in (((1024, 1024, 1024), tp.f32), ((512, 512, 512), tp.bf16)):
        kern, params = gemm_hopper.plan_kernel(shape[0], shape[1], out, gemm_hopper.policy(*shape, out, fixup=True),
                                               shape[2])
        yield f"{kern.name}[policy small {out}, RELAXED]", kern, "sm_90a", params
    mark(gemm.gemm, gemm_hopper.gemm_hopper, gemm_hopper.gemm_persistent, gemm_hopper.gemm_persistent_flat)
    for d, params in attention.PRESETS.items():
        for causal in (False, True):
            yield (f"attention_fwd[d{d}{', causal' if causal else ''}]", attention.attention_fwd, None,
                   {**params, "CAUSAL": causal})
        yield f"attention_fwd[d{d}, GQA 4, serial]", attention.attention_fwd, None, {**params, "GROUP": 4,
                                                                                    "PIPELINE": False}
        for qlen, causal in ((1, False), (4, True)):  # what decode() passes for one KV head of 64 rows or fewer
            yield (f"attention_decode[d{d}, q{qlen}]", attention.attention_decode, None,
                   dict(HEAD_DIM=d, BN=128, STAGES=attention.DECODE_STAGES[d], CONSUMERS=1, QLEN=qlen,
                        CAUSAL=causal))
    for (d, cls, causal), extra in attention.POLICIES.items():  # launch's policy table (attention.policy)
        if extra:
            yield (f"attention_fwd[policy d{d} {cls}{' causal' if causal else ''}]", attention.attention_fwd, None,
                   attention.policy(d, 512 if cls == "short" else 4096, causal))
    mark(attention.attention_fwd, attention.attention_decode)
    for target, params in conv.PRESETS.items():
        for k in (conv.conv2d, conv.conv_transpose2d):
            yield f"conv.{k.name}[{target}]", k, target, params
    mark(conv.conv2d, conv.conv_transpose2d)
    for mod, k in ((conv_igemm, conv_igemm.conv_igemm), (gemm_fp32, gemm_fp32.gemm_fp32)):
        for target, params in mod.PRESETS.items():
            yield f"{k.name}[{target}]", k, target, params
        mark(k)
    for b_layout, k in (("nk", gemm_fp32.gemm_fp32_ct), ("kn", gemm_fp32.gemm_fp32_kt)):   # the swap-AB forms
        params = gemm_fp32.swap_params(128, 4096, 4096, b_layout=b_layout)
        yield f"gemm_fp32_{'ct' if b_layout == 'nk' else 'kt'}[swap {b_layout} 128 rows]", k, "sm_90a", params
    mark(gemm_fp32.gemm_fp32_ct, gemm_fp32.gemm_fp32_kt)
    for cls in gemm_fp8.POLICIES:  # the scaled fp8 GEMM's policy classes
        M, N, K = {"large": (4096,) * 3, "small": (1024,) * 3, "skinny": (128, 4096, 4096)}[cls]
        yield f"gemm_fp8[policy {cls}]", gemm_fp8.gemm_fp8, "sm_90a", gemm_fp8.policy(M, N, K, forms=False)
    kern, params = gemm_fp8.kernel_of(gemm_fp8.policy(4096, 4096, 4096))   # the large class's persistent form
    yield f"{kern.name}[policy large]", kern, "sm_90a", params
    for name, shape in (("SMALL_64x64", (512,) * 3), ("SMALL_64x128", (1024,) * 3),   # the small / mid forms (G28)
                        ("MID_128x128", (2048, 1024, 4096)), ("UNALIGNED_N_192x176", (2051, 2045, 1008)),
                        ("UNALIGNED_N_192x192", (3000, 3001, 2048)), ("LARGE_STAGED", (4096, 4090, 1024))):
        yield f"gemm_fp8[policy {name}]", gemm_fp8.gemm_fp8, "sm_90a", gemm_fp8.kernel_of(gemm_fp8.policy(*shape))[1]
    mark(gemm_fp8.gemm_fp8, kern)
    for table in ("PRESETS", "SMALL_M", "TINY"):
        for which, params in getattr(moe, table).items():
            k = getattr(moe, f"moe_{which}")
            yield f"moe_{which}[{table}]", k, None, params
            mark(k)
    for k in (softmax.softmax, rmsnorm.rmsnorm, vector_add.vector_add):
        yield k.name, k, None, {}
    mark(softmax.softmax, rmsnorm.rmsnorm, vector_add.vector_add)
    from stdlib_kernels import gemm_streamk

    for which, params in gemm_streamk.PRESETS.items():  # the launch's tiles (narrow: 6 stages; wide: FIXUP=0)
        yield f"gemm_streamk[{which}]", gemm_streamk.gemm_streamk, "sm_90a", params
    from stdlib_kernels import gemm_splitk_swap

    # swap-AB with two consumers over one tile on alternate k-tiles (K_WAYS=2, two rings): the policy's 17-32-row
    # entry (64 x 32 tiles, 8 stages a ring) and 65-128-row class (SWAP_KWAYS), and the first in 2x1 clusters
    swap = {k: v for k, v in gemm_hopper.SWAP_KWAYS.items() if k in gemm_hopper.SWAP_KEYS}
    rows32 = dict(BM=32, BN=64, STAGES=8, INSTR=tp.nv.wgmma_m64n32k16_bf16, K_WAYS=2)
    for name, params in (("K_WAYS 2, 64x64 s6", swap), ("K_WAYS 2, 64x32 s8", rows32),
                         ("K_WAYS 2, 64x32 s8, 2x1 cluster", {**rows32, "CLUSTER_M": 2})):
        yield f"gemm_splitk_swap[{name}]", gemm_splitk_swap.gemm_splitk_swap, "sm_90a", params
    # the policy's cluster split (K over a (1, 1, 2) cluster; G14 / G19 / G23): the sums pushed by st.async (PUSH=1,
    # n32; n128 with the hand-over and received tiles in one, XCH=1)
    for m in (32, 128):
        params = {k: v for k, v in gemm_hopper.cluster_split(m, 4096, 4096).items() if k in gemm_hopper.SWAP_KEYS}
        yield f"gemm_splitk_swap[cluster split, {m} rows]", gemm_splitk_swap.gemm_splitk_swap, "sm_90a", params
    for m in pkgutil.iter_modules(stdlib_kernels.__path__):  # every other stdlib kernel, default constexprs
        mod = importlib.import_module(f"stdlib_kernels.{m.name}")
        for attr, k in vars(mod).items():
            if isinstance(k, tilepy.Kernel) and k not in seen:
                seen.add(k)
                yield f"{m.name}.{attr}", k, None, {}
    for asy in (False, True):
        yield f"window3[{'cp.async' if asy else 'copy'}]", window3, None, {"ASYNC": asy}


STAGES = (2, 3, 4, 6, 8)


def ring_cases():
    """(name, kernel, target, constexprs without STAGES) of the kernels whose mbarrier rings are unrolled per
    stage before the analysis (mbarrier_arrays.py): `--stages` times each at STAGES 2, 3, 4, 6, 8."""
    # tiles that fit 8 stages in a Hopper block's shared memory (128 x 64 and 64 x 128 GEMM tiles, 64-row K/V)
    tile = dict(BN=64, INSTR=tp.nv.wgmma_m64n64k16_bf16)
    hop = {**gemm_hopper.PRESETS["sm_90a"], **tile}
    yield "gemm_hopper[128x64]", gemm_hopper.gemm_hopper, "sm_90a", hop
    yield "gemm_persistent[128x64]", gemm_hopper.gemm_persistent, "sm_90a", dict(tile)
    yield "gemm_persistent_flat[128x64]", gemm_hopper.gemm_persistent_flat, "sm_90a", dict(tile)
    yield ("attention_fwd[d64, causal, BN 64]", attention.attention_fwd, None,
           {**attention.PRESETS[64], "CAUSAL": True, "BN": 64})
    from stdlib_kernels import gemm_streamk

    yield "gemm_streamk[narrow]", gemm_streamk.gemm_streamk, "sm_90a", dict(gemm_streamk.PRESETS["narrow"])
    from stdlib_kernels import gemm_splitk_swap

    # swap-AB with two consumers on alternate k-tiles (two rings, K_WAYS=2: the 17-32-row policy's form) in 2x1
    # clusters (B multicast, `empty` released remotely): three roles, four mbarrier arrays, the deadlock check's
    # longest cycle search
    yield ("gemm_splitk_swap[K_WAYS 2, 2x1 cluster, 64x32]", gemm_splitk_swap.gemm_splitk_swap, "sm_90a",
           dict(BM=32, BN=64, INSTR=tp.nv.wgmma_m64n32k16_bf16, K_WAYS=2, CLUSTER_M=2))
    from tests.verify.window_stages_kernels import window  # a rolling window of STAGES shared tiles, no mbarrier

    yield "window[STAGES shared tiles]", window, None, {}


def stages_table(args) -> int:
    """One line per ring kernel: verify seconds (and CPU seconds, queries) at each of STAGES."""
    print(f"{'kernel':32s} " + " ".join(f"{'S=' + str(s) + ' s/cpu/q':>20s}" for s in STAGES))
    rows = []
    for name, kernel, target, params in ring_cases():
        if args.only not in name:
            continue
        cells = []
        for st in STAGES:
            try:
                best, cpu, report = measure(kernel, target, {**params, "STAGES": st}, args.repeat)
            except Exception as e:  # noqa: BLE001 - a stage count the kernel does not build: reported, go on
                cells.append({"stages": st, "error": f"{type(e).__name__}: {str(e).splitlines()[0]}"})
                continue
            cells.append({"stages": st, "seconds": round(best, 4), "cpu_seconds": round(cpu, 4),
                          "queries": report.stats["queries"],
                          "findings": "clean" if not report.findings else ", ".join(
                              f"{f.severity}:{f.check}" for f in report.findings)})
        print(f"{name:32s} " + " ".join(
            f"{c['seconds']:7.2f}/{c['cpu_seconds']:5.2f}/{c['queries']:4d}" if "seconds" in c else f"{'error':>20s}"
            for c in cells), flush=True)
        rows.append({"kernel": name, "target": target, "by_stages": cells})
    if args.json:
        import json
        import platform

        meta = {"machine": platform.machine(), "processor": platform.processor(), "cpus": os.cpu_count(),
                "python": platform.python_version(), "load_avg": os.getloadavg(),
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "repeat": args.repeat,
                "stages": list(STAGES)}
        with open(args.json, "w") as f:
            json.dump({**meta, "kernels": rows}, f, indent=1)
    return 0


def measure(kernel, target, params, repeat):
    """(best wall seconds, best CPU seconds of this process, report) of `repeat` cold verifications (the CPU
    time shows what a loaded machine hides: the wall time of a quiet one)."""
    best, cpu, report = float("inf"), float("inf"), None
    for _ in range(repeat):
        kernel._cache.clear()  # fresh IR: nothing cached by the verifier either
        kir = kernel.ir(target, **params)
        t0, c0 = time.perf_counter(), time.process_time()
        report = tilepy_verify.verify_ir(kir)
        best = min(best, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    return best, cpu, report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="", help="run the cases whose name contains this")
    ap.add_argument("--json", default="", help="write the per-kernel seconds here (benchmarks/results/...)")
    ap.add_argument("--stages", action="store_true",
                    help="instead: the ring kernels' verify time at STAGES 2, 3, 4, 6, 8 (growth with STAGES)")
    args = ap.parse_args(argv)
    if args.stages:
        return stages_table(args)
    print(f"{'kernel':36s} {'target':8s} {'verify s':>9s} {'cpu s':>7s} {'queries':>8s}  findings")
    rows, failed = [], []
    for name, kernel, target, params in cases():
        if args.only not in name:
            continue
        try:
            best, cpu, report = measure(kernel, target, params, args.repeat)
        except Exception as e:  # noqa: BLE001 - a preset that does not build is a bug in the preset: report, go on
            failed.append(name)
            print(f"{name:36s} {'':8s} {'-':>9s} {'-':>7s} {'-':>8s}  FAILED: {type(e).__name__}: "
                  f"{str(e).splitlines()[0]}")
            rows.append({"kernel": name, "error": f"{type(e).__name__}: {e}"})
            continue
        summary = "clean" if not report.findings else ", ".join(
            f"{f.severity}:{f.check}" for f in report.findings)
        print(f"{name:36s} {report.target:8s} {best:9.3f} {cpu:7.3f} {report.stats['queries']:8d}  {summary}",
              flush=True)
        rows.append({"kernel": name, "target": report.target, "seconds": round(best, 4), "cpu_seconds": round(cpu, 4),
                     "queries": report.stats["queries"], "findings": summary})
    timed = [r for r in rows if "seconds" in r]
    worst = max(timed, key=lambda r: r["seconds"], default=None)
    if worst is not None:
        print(f"slowest: {worst['kernel']} {worst['seconds']:.3f} s (budget 2 s)")
    if failed:
        print(f"FAILED to build or verify: {', '.join(failed)}")
    if args.json:
        import json
        import platform

        meta = {"machine": platform.machine(), "processor": platform.processor(),
                "cpus": os.cpu_count(), "python": platform.python_version(),
                "load_avg": os.getloadavg(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "repeat": args.repeat, "budget_s": 2.0, "slowest": worst}
        with open(args.json, "w") as f:
            json.dump({**meta, "kernels": rows}, f, indent=1)
    return 0 if worst is not None and worst["seconds"] < 2.0 and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
