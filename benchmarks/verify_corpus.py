"""The seeded-bug corpora against the verifier: caught / missed / false alarms / time.

    python benchmarks/verify_corpus.py [--json FILE]

Runs tests/verify/seeded_corpus.py (issue 17: 43 bugs in 7 kernels) and tests/verify/seeded_corpus2.py (issue 17
item 7: more bugs in 10 more kernels), each bug beside its correct twin. A bug is caught when one of its expected
checks reports it and that check reports no error on the twin; a known miss (the corpus's KNOWN_MISSES, an
xfail in its test) is counted as missed; a false alarm is an error finding on a correct twin (known ones: the
corpus's KNOWN_FALSE_ALARMS). Prints one line per kernel (twin, bugs caught, slowest
verify, missed bugs) and the totals; exits 1 on a miss that is not a known one or on a false alarm."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import tilepy_verify  # noqa: E402
from tests.verify import seeded_corpus, seeded_corpus2  # noqa: E402

CORPORA = [("seeded_corpus", seeded_corpus), ("seeded_corpus2", seeded_corpus2)]


def _timed(kernel, **cx):
    t0 = time.perf_counter()
    report = tilepy_verify.verify(kernel, **cx)
    return report, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the per-bug results to this file")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    caught = missed = known = false_alarms = known_fa = twins = 0
    times, rows = [], []
    slowest = (0.0, "")
    print(f"{'corpus':15s} {'kernel':14s} {'twin':>10s} {'caught':>8s} {'slowest s':>10s}  missed")
    for cname, C in CORPORA:
        known_misses = {(k.name, bug) for k, bug, _ in getattr(C, "KNOWN_MISSES", [])}
        known_alarms = {k.name for k, _ in getattr(C, "KNOWN_FALSE_ALARMS", [])}
        for kernel in C.KERNELS:
            kernel._cache.clear()
            twin, t_twin = _timed(kernel)
            twins += 1
            times.append(t_twin)
            false_alarms += len(twin.errors)
            known_fa += len(twin.errors) if kernel.name in known_alarms else 0
            twin_checks = {f.check for f in twin.errors}
            slowest = max(slowest, (t_twin, f"{cname}.{kernel.name} (twin)"))
            rows.append({"corpus": cname, "kernel": kernel.name, "bug": "none", "seconds": round(t_twin, 3),
                         "errors": sorted({f.check for f in twin.errors})})
            got, slow, miss = 0, t_twin, []
            cases = [c for c in C.CORPUS if c[0] is kernel]
            for _, bug, checks, _shows in cases:
                report, dt = _timed(kernel, BUG=bug)
                times.append(dt)
                slow = max(slow, dt)
                slowest = max(slowest, (dt, f"{cname}.{kernel.name} BUG={bug}"))
                hit = any(f.check in checks - twin_checks for f in report.findings)
                rows.append({"corpus": cname, "kernel": kernel.name, "bug": bug, "seconds": round(dt, 3),
                             "expected": sorted(checks), "found": sorted({f.check for f in report.findings}),
                             "caught": hit})
                if hit:
                    got += 1
                else:
                    miss.append(bug + (" (known)" if (kernel.name, bug) in known_misses else ""))
                    known += (kernel.name, bug) in known_misses
            caught += got
            missed += len(miss)
            twin_s = "clean" if twin.ok else f"{len(twin.errors)} errors" + ("*" if kernel.name in known_alarms else "")
            print(f"{cname:15s} {kernel.name:14s} {twin_s:>10s} {got:>4d}/{len(cases):<3d} {slow:10.3f}  "
                  f"{', '.join(miss)}")
    total = caught + missed
    print(f"total: {total} seeded bugs in {twins} kernels; caught {caught}/{total}, missed {missed} "
          f"({known} known), false alarms {false_alarms} ({known_fa} known; errors on {twins} correct twins); "
          f"verify time total {sum(times):.1f} s, max {slowest[0]:.3f} s ({slowest[1]}); "
          f"{os.cpu_count()} CPUs, load average {load:.1f} at the start")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": time.strftime("%Y-%m-%d"), "machine": platform.processor() or platform.machine(),
                       "python": platform.python_version(), "cpus": os.cpu_count(), "load_average": round(load, 2),
                       "bugs": total, "kernels": twins, "caught": caught,
                       "missed": missed, "known_misses": known, "false_alarms": false_alarms,
                       "known_false_alarms": known_fa,
                       "total_s": round(sum(times), 2), "max_s": round(slowest[0], 3), "slowest": slowest[1],
                       "results": rows}, f, indent=1)
    return 0 if missed == known and false_alarms == known_fa else 1


if __name__ == "__main__":
    sys.exit(main())
