"""Where the time of one `argus optimize` run goes (issue 12 item 5): every sandbox evaluation, by caller.

    python benchmarks/agent_profile.py tests/problems/level1/001_relu.py [--budget 8] [--target sm_90a] [--out F]

Runs `optimize` in this process with the sandbox wrapped: each `Sandbox.check` is recorded with its caller
(template, skill, the tuner's feasibility and evaluations, ablation), its stages, its outcome, its wall time and
the child's seconds per stage; the parent's reference timings are recorded too. Prints a table of totals per
caller and per stage, and writes the rows as JSON (`--out`).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def caller() -> str:
    names = [f.name for f in traceback.extract_stack()]
    for name, tag in (("ablate", "ablation"), ("feasibility", "tune-feasibility"), ("run_point", "tune-eval"),
                      ("tune", "tune-final"), ("first_source", "template")):
        if name in names:
            return tag
    return "step"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("problem")
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--target", default="sm_90a")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    from argus_agent import sandbox
    from argus_agent.history import History
    from argus_agent.loop import optimize

    rows, refs = [], []
    check, ref_ms, ref_graph = sandbox.Sandbox.check, sandbox.Sandbox.reference_ms, sandbox.Sandbox.reference_graph_ms

    def timed_check(self, source, **kw):
        t0 = time.monotonic()
        res = check(self, source, **kw)
        stages = list(kw.get("stages", ("build", "verify", "test")))
        rows.append({"caller": caller() if rows else "template", "stages": stages,
                     "outcome": res.outcome, "seconds": round(time.monotonic() - t0, 3),
                     "stage_seconds": res.stage_seconds})
        return res

    def wrap(fn, what):
        def inner(self, *a):
            t0 = time.monotonic()
            out = fn(self, *a)
            refs.append({"what": what, "seconds": round(time.monotonic() - t0, 3)})
            return out
        return inner

    from argus_agent import loop

    phases = {}

    def phase(mod, name):
        fn = getattr(mod, name)

        def inner(*a, **k):
            t0 = time.monotonic()
            try:
                return fn(*a, **k)
            finally:
                phases[name] = phases.get(name, 0.0) + time.monotonic() - t0
        setattr(mod, name, inner)

    for name in ("load_problem", "lower_problem", "load_kb"):
        phase(loop, name)
    phase(loop, "ablate")
    sandbox.Sandbox.check = timed_check
    sandbox.Sandbox.reference_ms = wrap(ref_ms, "reference_ms")
    sandbox.Sandbox.reference_graph_ms = wrap(ref_graph, "reference_graph_ms")
    tmp = Path(tempfile.mkdtemp(prefix="argus-profile-"))
    t0 = time.monotonic()
    res = optimize(args.problem, target=args.target, budget=args.budget, out_dir=tmp / "out",
                   history=History(tmp / "history.db"), resume=False)
    total = time.monotonic() - t0
    by_caller = collections.defaultdict(lambda: [0, 0.0])
    by_stage = collections.Counter()
    for r in rows:
        by_caller[r["caller"]][0] += 1
        by_caller[r["caller"]][1] += r["seconds"]
        by_stage.update(r["stage_seconds"] or {})
    print(f"{args.problem}: {total:.1f} s, status {res.status}, best speedup {res.best_speedup}")
    print(f"{'caller':20s} {'calls':>5s} {'seconds':>8s}")
    for k, (n, s) in sorted(by_caller.items(), key=lambda kv: -kv[1][1]):
        print(f"{k:20s} {n:5d} {s:8.1f}")
    print("child seconds per stage: " + ", ".join(f"{k} {v:.1f}" for k, v in by_stage.most_common()))
    print(f"parent reference timing: {sum(r['seconds'] for r in refs):.1f} s over {len(refs)} calls")
    print(f"outside the sandbox and reference timing: {total - sum(r['seconds'] for r in rows):.1f} s; of it: "
          + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items()))
    if args.out:
        Path(args.out).write_text(json.dumps({"problem": args.problem, "budget": args.budget, "seconds": total,
                                              "checks": rows, "references": refs, "phases": phases}, indent=1))


if __name__ == "__main__":
    main()
