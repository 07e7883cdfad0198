"""Tile shapes of a lowered reduction over gathered table rows (EmbeddingBag mean, level1/196) on the GPU:
the generated kernel at its (BM, BR) and at other tiles, and the same kernel with its index load hoisted to
one (BR, 1) tile per block (valid where BM divides the row length), each against eager in the same run.

    python3 benchmarks/gather_rows_tiles.py [--out results.json]

Times are CUDA-graph medians (benchmarks/timing.py); every variant's output is checked against eager first."""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--problem", default=str(ROOT / "tests/problems/level1/196_embedding_bag_mean.py"))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import torch

    import tilepy as tp
    from argus_agent.lower.candidate import lower_problem
    from argus_agent.problem import load_problem
    from argus_agent.runtime import launch as real_launch
    from benchmarks.timing import graph_seconds

    torch.manual_seed(0)
    problem = load_problem(args.problem, cpu=False)
    src = lower_problem(problem, "sm_90a").source
    model = problem.make_model().cuda().eval()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.base_inputs]
    with torch.no_grad():
        ref = model(*inputs)
    rows = []

    def load_module(text, name):
        f = Path(tempfile.mkdtemp()) / f"{name}.py"
        f.write_text(text)
        spec = importlib.util.spec_from_file_location(name, f)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    def measure(name, mod, **constexprs):
        def launch(kernel, grid, *a, **kw):
            kw = {**kw, **constexprs}
            if callable(grid):
                grid = grid({**kernel.resolve_constexprs({}), **kw})
            return real_launch(kernel, grid, *a, **kw)
        mod.launch = launch
        with torch.no_grad():
            try:
                out = mod.argus_forward(model, *inputs)
                torch.cuda.synchronize()
                err = float((out.double() - ref.double()).abs().max())
                s = graph_seconds(lambda: mod.argus_forward(model, *inputs))
            except Exception as e:  # noqa: BLE001 - a variant that does not build is a row with its error
                rows.append({"variant": name, "constexprs": constexprs, "error": f"{type(e).__name__}: {e}"[:300]})
                print(name, constexprs, "ERROR", e)
                return
        rows.append({"variant": name, "constexprs": constexprs, "ms": s * 1e3, "max_err": err})
        print(f"{name:10s} {constexprs} {s * 1e3:.4f} ms err {err:.2e}")

    with torch.no_grad():
        eager = graph_seconds(lambda: model(*inputs))
    print(f"eager {eager * 1e3:.4f} ms")
    base = load_module(src, "gather_rows_base")
    measure("lowered", base)
    for bm, br in [(128, 8), (128, 32), (256, 8), (512, 4), (64, 32)]:
        measure("lowered", base, BM=bm, BR=br)
    # the index load hoisted: m // D is the block's m0 // D when BM divides D (the row length)
    import re
    hoisted = re.sub(r"\(m // (\d+)\)", r"(m0 // \1)", src)
    hoisted = "\n".join(ln for ln in hoisted.splitlines() if "tp.assert_tag" not in ln and "tp.tag(" not in ln)
    hmod = load_module(hoisted, "gather_rows_hoisted")
    for bm, br in [(128, 16), (128, 32), (256, 16), (512, 8)]:
        measure("hoisted", hmod, BM=bm, BR=br)
    best = min((r for r in rows if "ms" in r), key=lambda r: r["ms"])
    out = {"what": "level1/196 EmbeddingBag mean: lowered kernel tiles vs eager (CUDA-graph median)",
           "device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "eager_ms": eager * 1e3, "rows": rows,
           "best": {**best, "speedup_vs_eager": eager * 1e3 / best["ms"]}}
    print("best", out["best"])
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    del tp
    return 0


if __name__ == "__main__":
    sys.exit(main())
