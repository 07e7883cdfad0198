"""Combine suite results: rows of later files replace the base file's rows of the same problem.

    python benchmarks/suite_combine.py BASE.json LATER.json [LATER2.json ...] [--out BASE.json]

For re-measurements of some problems (after a change, in a separate `benchmarks/suite.py` run on the same
device) folded into the corpus-wide table. Rows skipped for time are never taken. Each taken row records the
file it came from (`from`); the per-level summary is recomputed (`suite.summarize`). All files must name the
same device.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from suite import summarize  # noqa: E402


def combine(base: dict, later: list[tuple[str, dict]]) -> dict:
    rows = {r["name"]: r for r in base["problems"]}
    for name, data in later:
        if data.get("device") != base.get("device"):
            raise SystemExit(f"{name}: device {data.get('device')!r}, the base is {base.get('device')!r}")
        for r in data["problems"]:
            if not r.get("skipped"):
                rows[r["name"]] = dict(r, **{"from": Path(name).name})
    out = dict(base, problems=sorted(rows.values(), key=lambda r: r["name"]))
    out["summary"] = summarize(out["problems"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base")
    ap.add_argument("later", nargs="+")
    ap.add_argument("--out", default=None, help="where to write (default: the base file)")
    args = ap.parse_args()
    base = json.loads(Path(args.base).read_text())
    out = combine(base, [(p, json.loads(Path(p).read_text())) for p in args.later])
    Path(args.out or args.base).write_text(json.dumps(out, indent=1))
    print(json.dumps(out["summary"], indent=1))


if __name__ == "__main__":
    main()
