"""The seeded-bug corpora against the verifier: caught / false alarms / time.

    python benchmarks/verify_corpus.py

For tests/verify/seeded_corpus.py (issue 17: 43 bugs in 7 kernels with correct twins): a bug is caught when one
of its expected checks reports it; a false alarm is an error finding on a correct twin. Prints one line per
kernel (twin time, bugs caught, slowest verify) and the totals."""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import tilepy_verify  # noqa: E402
from tests.verify import seeded_corpus as S  # noqa: E402


def main() -> int:
    caught = missed = false_alarms = 0
    times = []
    print(f"{'kernel':14s} {'twin':>10s} {'caught':>8s} {'slowest s':>10s}  missed")
    for kernel in S.KERNELS:
        kernel._cache.clear()
        t0 = time.perf_counter()
        twin = tilepy_verify.verify(kernel)
        t_twin = time.perf_counter() - t0
        times.append(t_twin)
        false_alarms += len(twin.errors)
        got, slow, miss = 0, t_twin, []
        cases = [c for c in S.CORPUS if c[0] is kernel]
        for _, bug, checks, _shows in cases:
            t0 = time.perf_counter()
            report = tilepy_verify.verify(kernel, BUG=bug)
            dt = time.perf_counter() - t0
            times.append(dt)
            slow = max(slow, dt)
            if any(f.check in checks for f in report.findings):
                got += 1
            else:
                miss.append(bug)
        caught += got
        missed += len(miss)
        twin_s = "clean" if twin.ok else f"{len(twin.errors)} errors"
        print(f"{kernel.name:14s} {twin_s:>10s} {got:>4d}/{len(cases):<3d} {slow:10.3f}  {', '.join(miss)}")
    print(f"caught {caught}/{caught + missed}, false alarms {false_alarms} (on {len(S.KERNELS)} twins), "
          f"verify time total {sum(times):.1f} s, slowest {max(times):.3f} s")
    return 0 if missed == 0 and false_alarms == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
