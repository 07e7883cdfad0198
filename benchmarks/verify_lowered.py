"""Verify time of every kernel the lowering generates for the corpus (tests/problems, CPU sizes).

    python benchmarks/verify_lowered.py [--every N] [--json benchmarks/results/verify_lowered.json]

Lowers each problem (argus_agent.lower), compiles the candidate module, and verifies each generated kernel
(`tilepy_verify.verify_ir`, target sm_90a as the agent's gate does), cold: fresh IR, no verifier cache.
Prints one line per kernel (problem, kernel, best-of-N seconds, SMT queries, tag assertions, findings), then the
slowest and how many kernels carry tag assertions (issue 17 item 6: the index maps are proved). The budget is
< 2 s per kernel on 2 CPU cores. Template kernels (stdlib GEMMs) are in benchmarks/verify_speed.py."""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import tilepy  # noqa: E402
import tilepy_verify  # noqa: E402
from argus_agent.lower.candidate import lower_problem  # noqa: E402
from argus_agent.problem import load_problem  # noqa: E402

CORPUS = sorted((ROOT / "tests" / "problems").glob("level*/[0-9]*.py"))


def generated_kernels(path, tmp: Path):
    """{name: Kernel} of the lowered candidate of one corpus problem (its own kernels, not templates)."""
    src = lower_problem(load_problem(path, cpu=True)).source
    f = tmp / f"lowered_{path.parent.name}_{path.stem}.py"
    f.write_text(src)
    spec = importlib.util.spec_from_file_location(f.stem, f)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {k: v for k, v in vars(mod).items() if isinstance(v, tilepy.Kernel) and v.fn.__module__ == f.stem}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--every", type=int, default=1, help="every N-th corpus problem")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--repeat", type=int, default=2, help="best of N cold verifications per kernel")
    ap.add_argument("--only", default="", help="the problems whose file name contains this (e.g. transpose)")
    args = ap.parse_args(argv)
    rows, failed_lowering = [], []
    tmp = Path(tempfile.mkdtemp())
    t_all = time.perf_counter()
    print(f"{'problem':44s} {'kernel':28s} {'verify s':>9s} {'queries':>8s} {'asserts':>8s}  findings")
    for path in [p for p in CORPUS if args.only in p.name][:: args.every]:
        pname = f"{path.parent.name}/{path.stem}"
        try:
            kernels = generated_kernels(path, tmp)
        except Exception as e:  # noqa: BLE001 - reported, not fatal: the lowering tests own lowering errors
            failed_lowering.append((pname, f"{type(e).__name__}: {str(e).replace(str(tmp) + '/', '')[:200]}"))
            continue
        for kname, k in kernels.items():
            dt, report, n_assert = float("inf"), None, 0
            for _ in range(args.repeat):
                k._cache.clear()  # fresh IR: nothing cached by the verifier either
                try:
                    kir = k.ir("sm_90a")
                except Exception as e:  # noqa: BLE001 - a generated kernel that does not compile: a lowering bug
                    msg = str(e).replace(str(tmp) + "/", "")
                    failed_lowering.append((f"{pname} {kname}", f"{type(e).__name__}: {msg[:300]}"))
                    break
                n_assert = sum(1 for s in tilepy.ir.walk(kir.body) if isinstance(s, tilepy.ir.Eval)
                               and s.call.op == "assert_tag")
                t0 = time.perf_counter()
                report = tilepy_verify.verify_ir(kir)
                dt = min(dt, time.perf_counter() - t0)
            if report is None:
                continue
            errors = [f.message for f in report.findings if f.severity == "error"]
            rows.append({"problem": pname, "kernel": kname, "seconds": round(dt, 4),
                         "queries": report.stats.get("queries", 0), "assertions": n_assert, "errors": errors})
            print(f"{pname:44s} {kname:28s} {dt:9.3f} {report.stats.get('queries', 0):8d} {n_assert:8d}  "
                  f"{'; '.join(e[:80] for e in errors) or 'ok'}")
    rows.sort(key=lambda r: -r["seconds"])
    total = time.perf_counter() - t_all
    tagged = sum(1 for r in rows if r["assertions"])
    bad = [r for r in rows if r["errors"]]
    print(f"\n{len(rows)} kernels from {len(CORPUS[::args.every]) - len(failed_lowering)} problems in {total:.1f} s; "
          f"{tagged} carry tag assertions ({sum(r['assertions'] for r in rows)} in all); "
          f"{len(bad)} with errors")
    for r in rows[:5]:
        print(f"slowest: {r['problem']} {r['kernel']} {r['seconds']:.3f} s ({r['queries']} queries)")
    for p, e in failed_lowering:
        print(f"not lowered or not compiled: {p}: {e}")
    if args.json:
        out = {"what": "tilepy-verify time per generated kernel (corpus at CPU sizes, target sm_90a)",
               "date": datetime.date.today().isoformat(), "python": platform.python_version(),
               "cpus": os.cpu_count(), "machine": platform.processor() or platform.machine(),
               "kernels": len(rows), "tagged_kernels": tagged, "kernels_with_errors": len(bad),
               "slowest_seconds": rows[0]["seconds"] if rows else None, "total_seconds": round(total, 1),
               "not_lowered": failed_lowering, "rows": rows}
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
