"""Verify time of every stdlib kernel (each GEMM preset), cold (fresh IR, no verifier cache).

    python benchmarks/verify_speed.py [--repeat 3]

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
import tilepy_verify  # noqa: E402
from stdlib_kernels import gemm, gemm_hopper, rmsnorm, softmax, vector_add  # noqa: E402
from tests.verify.window_kernels import window3  # noqa: E402


def cases():
    for target, params in gemm.PRESETS.items():
        yield f"gemm[{target}]", gemm.gemm, target, params
    for target, params in gemm_hopper.PRESETS.items():
        yield f"gemm_hopper[{target}]", gemm_hopper.gemm_hopper, target, params
        yield f"gemm_hopper[{target}, 128x128]", gemm_hopper.gemm_hopper, target, {**params, **gemm_hopper.SMALL_TILE}
    for cls in gemm_hopper.POLICIES:  # the policy table's classes (wait_group 1, 6 stages, split-K)
        M, N, K = {"large": (4096,) * 3, "small": (1024,) * 3, "skinny": (128, 4096, 4096),
                   "unaligned": (2051, 2045, 1000)}[cls]
        yield f"gemm_hopper[policy {cls}]", gemm_hopper.gemm_hopper, "sm_90a", gemm_hopper.policy(M, N, K)
    for k in (softmax.softmax, rmsnorm.rmsnorm, vector_add.vector_add):
        yield k.name, k, None, {}
    seen = {gemm.gemm, gemm_hopper.gemm_hopper, softmax.softmax, rmsnorm.rmsnorm, vector_add.vector_add}
    for m in pkgutil.iter_modules(stdlib_kernels.__path__):  # every other stdlib kernel, default constexprs
        mod = importlib.import_module(f"stdlib_kernels.{m.name}")
        for k in vars(mod).values():
            if isinstance(k, tilepy.Kernel) and k not in seen:
                seen.add(k)
                yield f"{m.name}.{k.name}", k, None, {}
    for asy in (False, True):
        yield f"window3[{'cp.async' if asy else 'copy'}]", window3, None, {"ASYNC": asy}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    print(f"{'kernel':30s} {'target':8s} {'verify s':>9s} {'queries':>8s}  findings")
    worst, slowest = 0.0, ""
    for name, kernel, target, params in cases():
        best, report = float("inf"), None
        for _ in range(args.repeat):
            kernel._cache.clear()  # fresh IR: nothing cached by the verifier either
            kir = kernel.ir(target, **params)
            t0 = time.perf_counter()
            report = tilepy_verify.verify_ir(kir)
            best = min(best, time.perf_counter() - t0)
        if best > worst:
            worst, slowest = best, name
        summary = "clean" if not report.findings else ", ".join(
            f"{f.severity}:{f.check}" for f in report.findings)
        print(f"{name:30s} {report.target:8s} {best:9.3f} {report.stats['queries']:8d}  {summary}")
    print(f"slowest: {slowest} {worst:.3f} s (budget 2 s)")
    return 0 if worst < 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
