"""Times each problem's eager reference at its real sizes and flags those under the corpus's 50 us floor.

The corpus tests bound the reference's time from below with an H100 roofline (no GPU needed); this script
measures it. On a GPU machine, from the repository root:

    python tests/problems/measure_real_sizes.py [--level level1] [--json times.json]

Each problem is built on the device (inputs made there, seeded as KernelBench does), warmed up, then timed with
device events; the median of `--iters` runs is reported. `--cpu-sizes` times the CPU sizes instead (a smoke test).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

try:
    from . import corpus
except ImportError:  # run as a script: this directory is on sys.path
    import corpus

FLOOR_US = 50.0


def _sync(device: str):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_problem(path, device: str = "cuda", cpu_sizes: bool = False, iters: int = 10, warmup: int = 3) -> dict:
    """{'name', 'median_us', 'error'} for one problem's eager reference on `device`."""
    record = {"name": corpus.problem_id(path), "median_us": None, "error": None}
    try:
        module = corpus.load(path)
        with torch.device(device):
            model, inputs = corpus.build(module, cpu=cpu_sizes)
        times = []
        with torch.no_grad():
            for i in range(warmup + iters):
                _sync(device)
                start = time.perf_counter()
                model(*inputs)
                _sync(device)
                if i >= warmup:
                    times.append((time.perf_counter() - start) * 1e6)
        record["median_us"] = statistics.median(times)
    except Exception as e:  # one problem's failure (e.g. out of memory) must not stop the sweep
        record["error"] = f"{type(e).__name__}: {e}"[:300]
    finally:
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    return record


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--level", choices=corpus.LEVELS)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--cpu-sizes", action="store_true", help="time the CPU sizes (a smoke test)")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--json", help="also write the records to this file")
    args = parser.parse_args(argv)

    records = [time_problem(p, args.device, args.cpu_sizes, args.iters) for p in corpus.problem_paths(args.level)]
    slow_enough = [r for r in records if r["median_us"] is not None and r["median_us"] >= FLOOR_US]
    for r in records:
        shown = r["error"] or f"{r['median_us']:10.1f} us" + ("" if r["median_us"] >= FLOOR_US else "  < floor")
        print(f"{r['name']:64s} {shown}")
    print(f"{len(slow_enough)}/{len(records)} at or above {FLOOR_US:.0f} us on {args.device}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": args.device, "cpu_sizes": args.cpu_sizes, "problems": records}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
