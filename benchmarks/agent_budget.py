"""Wall time and host memory of `argus optimize --budget N` per problem, at the problem's own sizes (issue 12 item 5).

    python benchmarks/agent_budget.py tests/problems/level1/001_relu.py ... [--budget 8] [--target sm_90a]

Each problem runs as its own `argus optimize` process (a fresh interpreter, the kernel cache on disk shared, as
`argus suite` workers run), one after the other. Per problem: the wall time, the process's peak resident set
(`wait4`'s ru_maxrss), the problem's input bytes (`get_inputs()` at full size) and the limit the issue sets for it,
2 x input bytes + 2 GB. Prints one line per problem and the median, writes
`benchmarks/results/agent_budget-<device>.json` (device name, versions, date).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def input_bytes(path: Path) -> int:
    """Bytes of the tensors `get_inputs()` returns at the problem's own sizes (their shapes, not their data)."""
    import torch

    from argus_agent.problem import load_problem

    problem = load_problem(path, cpu=False)
    return sum(x.numel() * x.element_size() for x in problem.base_inputs if isinstance(x, torch.Tensor))


def run(path: Path, budget: int, target: str, db: Path) -> dict:
    out = Path(tempfile.mkdtemp(prefix="argus-budget-"))
    cmd = [sys.executable, "-m", "argus_agent", "optimize", str(path), "--target", target, "--budget", str(budget),
           "--out", str(out), "--db", str(db), "--json", "--no-resume"]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.monotonic() - t0
    stdout, stderr = proc.stdout.read(), proc.stderr.read()
    row = {"problem": f"{path.parent.name}/{path.stem}", "seconds": round(seconds, 1),
           "peak_rss_bytes": usage.ru_maxrss * 1024, "exit": os.waitstatus_to_exitcode(status)}
    try:
        got = json.loads(stdout[stdout.index("{"):])
        row.update({k: got.get(k) for k in ("status", "correct", "best_speedup", "iterations", "precision")})
    except ValueError:
        row["stderr"] = stderr[-800:]
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("problems", nargs="+")
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--target", default="sm_90a")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import torch

    db = Path(tempfile.mkdtemp(prefix="argus-budget-db-")) / "history.db"
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    out = Path(args.out or ROOT / "benchmarks" / "results" / f"agent_budget-{device.replace(' ', '_')}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for p in map(Path, args.problems):
        row = run(p, args.budget, args.target, db)
        row["input_bytes"] = input_bytes(p)
        row["rss_limit_bytes"] = 2 * row["input_bytes"] + 2 * 2**30
        row["rss_within_limit"] = row["peak_rss_bytes"] <= row["rss_limit_bytes"]
        rows.append(row)
        print(f"{row['problem']:50s} {row['seconds']:7.1f} s  peak RSS {row['peak_rss_bytes'] / 2**30:5.2f} GiB "
              f"(limit {row['rss_limit_bytes'] / 2**30:5.2f})  exit {row['exit']}  {row.get('status')} "
              f"speedup {row.get('best_speedup')}", flush=True)
        med = statistics.median(r["seconds"] for r in rows)
        # written after every problem: a run cut short keeps what it measured
        out.write_text(json.dumps({"device": device, "torch": torch.__version__, "python": sys.version.split()[0],
                                   "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"),
                                   "budget": args.budget, "target": args.target, "median_seconds": med,
                                   "problems": rows}, indent=1))
    print(f"median wall time {med:.1f} s over {len(rows)} problems (budget {args.budget}); "
          f"host memory within 2 x inputs + 2 GB: {sum(r['rss_within_limit'] for r in rows)}/{len(rows)}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
