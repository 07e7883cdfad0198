"""The problem corpus at full size on a GPU: lower each problem, check it against eager PyTorch, time both.

    python benchmarks/suite.py tests/problems/level1 tests/problems/level2 [--jobs 12] [--runs 20] [--compile]

Phase 1 lowers every problem and builds its kernels in `--jobs` worker processes (NVRTC; the kernel cache on
disk is shared), phase 2 runs each problem in this process on the GPU: fresh random inputs at the problem's own
sizes, the reference on the device, a comparison at the precision PyTorch computes at (see
`argus_agent/lower/candidate.py`), then the median of `--runs` timed calls of each, eager-launched and
CUDA-graph-replayed (`tilepy_hip.graphs`). `--compile` also times `torch.compile(Model)` (slow to build).
Writes `benchmarks/results/suite-<device>.json` with per-problem rows and, per level, the correct, solved
(correct and >= 0.8x eager) and fast_p shares.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
import traceback
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
warnings.filterwarnings("ignore")


def problem_files(dirs) -> list[Path]:
    out = []
    for d in dirs:
        p = Path(d)
        out += sorted(f for f in p.glob("*.py") if f.name[0].isdigit()) if p.is_dir() else [p]
    return out


def _build(path: str, precision: str | None = None) -> tuple[str, str]:
    """Worker: lower the problem and compile its kernels (fills the on-disk cache); '' or the error."""
    warnings.filterwarnings("ignore")
    try:
        import tilepy_hip
        from argus_agent.lower.candidate import lower_problem
        from argus_agent.problem import load_problem

        problem = load_problem(path, cpu=False)
        first = lower_problem(problem, "sm_90a", precision)
        mod = _load_source(first.source, Path(path).stem)
        for k in _kernels(mod):
            tilepy_hip.compile(k, target="sm_90a")
        return path, ""
    except Exception as e:  # a problem that fails is a row with its error, never a crash of the suite
        return path, f"{type(e).__name__}: {str(e).strip()[:600]}"


def _kernels(mod):
    import tilepy as tp

    return [v for v in vars(mod).values() if isinstance(v, tp.Kernel)]


def _load_source(source: str, stem: str):
    import importlib.util
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="argus-suite-"))
    p = d / f"cand_{stem}.py"
    p.write_text(source)
    spec = importlib.util.spec_from_file_location(f"cand_{stem}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _median_ms(fn, runs: int, warmup: int = 3) -> float:
    import torch

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    if time.perf_counter() - t0 > 0.05:   # slow calls: a few runs say enough
        runs, warmup = min(runs, 3), 0
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def run_one(path: Path, runs: int, with_compile: bool, precision: str | None = None) -> dict:
    """One problem's row; with `precision` the reference runs at it too (PyTorch's matching settings)."""
    from argus_agent.lower.precision import matching_reference

    with matching_reference(precision):
        return _run_one(path, runs, with_compile, precision)


def _run_one(path: Path, runs: int, with_compile: bool, precision: str | None) -> dict:
    import torch

    from argus_agent.lower.candidate import lower_problem
    from argus_agent.problem import load_problem

    row = {"name": f"{path.parent.name}/{path.stem}", "correct": False, "speedup_eager": None,
           "speedup_graph": None, "speedup_compile": None, "precision": None, "error": None}
    try:
        problem = load_problem(path, cpu=False)
        first = lower_problem(problem, "sm_90a", precision)
        row["precision"], row["kernels"] = first.precision, len(first.program.kernels)
        mod = _load_source(first.source, path.stem)
        model = problem.make_model().cuda()
        gen = torch.Generator().manual_seed(7)
        inputs = problem.draw_inputs(problem.shapes(1)[0], gen, "cuda")
        with torch.no_grad():
            ref = model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
            out = mod.argus_forward(model, *inputs)
        torch.cuda.synchronize()
        refs = ref if isinstance(ref, tuple) else (ref,)
        outs = out if isinstance(out, tuple) else (out,)
        errs = []
        ok = len(refs) == len(outs)
        for o, r in zip(outs, refs):
            if o.shape != r.shape:
                ok = False
                errs.append(f"shape {tuple(o.shape)} vs {tuple(r.shape)}")
                continue
            ok &= bool(torch.allclose(o.double(), r.double(), atol=first.tol, rtol=first.tol, equal_nan=True))
            errs.append(float((o.double() - r.double()).abs().max()) if o.numel() else 0.0)
        row["correct"], row["max_err"], row["tol"] = ok, errs, first.tol
        with torch.no_grad():
            row["eager_ms"] = _median_ms(lambda: model(*inputs), runs)
            row["ours_ms"] = _median_ms(lambda: mod.argus_forward(model, *inputs), runs)
            row["speedup_eager"] = row["eager_ms"] / row["ours_ms"]
            try:
                from tilepy_hip.graphs import capture

                graph = capture(lambda *xs: mod.argus_forward(model, *xs), *inputs)
                row["graph_ms"] = _median_ms(graph.replay, runs)   # the inputs are in place: replay alone
                row["speedup_graph"] = row["eager_ms"] / row["graph_ms"]
            except Exception as e:
                row["graph_error"] = f"{type(e).__name__}: {str(e)[:200]}"
            if with_compile:
                compiled = torch.compile(model)
                compiled(*inputs)
                row["compile_ms"] = _median_ms(lambda: compiled(*inputs), runs)
                row["speedup_compile"] = row["compile_ms"] / min(row["ours_ms"], row.get("graph_ms") or 1e30)
    except Exception as e:
        row["error"] = f"{type(e).__name__}: {str(e).strip()[:600]}"
        row["trace"] = traceback.format_exc()[-1500:]
    finally:
        torch.cuda.empty_cache()
    return row


def summarize(rows: list[dict]) -> dict:
    out = {}
    for level in sorted({r["name"].split("/")[0] for r in rows}):
        rs = [r for r in rows if r["name"].startswith(level + "/") and not r.get("skipped")]
        if not rs:
            continue
        best = [max(r.get("speedup_eager") or 0, r.get("speedup_graph") or 0) if r["correct"] else 0 for r in rs]
        n = len(rs)
        out[level] = {"problems": n, "correct": sum(r["correct"] for r in rs) / n,
                      "solved": sum(b >= 0.8 for b in best) / n,
                      "fast_p": {str(p): sum(b > p for b in best) / n for p in (0, 0.8, 1, 1.5, 2)}}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--compile", action="store_true", help="also time torch.compile(Model)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--merge", default=None, help="a results JSON: problems it holds (not skipped) are kept, "
                    "the rest are run, and the merged results are written")
    ap.add_argument("--precision", choices=("fp32", "tf32", "bf16"), default=None,
                    help="fp32 matmuls and convolutions at this precision (default: PyTorch's settings)")
    ap.add_argument("--time-budget", type=float, default=None, help="seconds: start no new problem after this")
    args = ap.parse_args()
    import torch

    per_dir = [problem_files([d]) for d in args.dirs]
    files = [f for group in itertools.zip_longest(*per_dir) for f in group if f is not None]  # interleaved
    kept = []
    if args.merge:
        kept = [r for r in json.loads(Path(args.merge).read_text())["problems"] if not r.get("skipped")]
        done = {r["name"] for r in kept}
        files = [f for f in files if f"{f.parent.name}/{f.stem}" not in done]
    t0 = time.time()
    with mp.get_context("spawn").Pool(args.jobs) as pool:
        built = dict(pool.starmap(_build, [(str(f), args.precision) for f in files], chunksize=1))
    print(f"built {len(files)} problems in {time.time() - t0:.0f} s", flush=True)
    rows = []
    for f in files:
        if args.time_budget and time.time() - t0 > args.time_budget:
            rows.append({"name": f"{f.parent.name}/{f.stem}", "correct": False, "speedup_eager": None,
                         "speedup_compile": None, "precision": None, "error": "not run: time budget",
                         "skipped": True})
            continue
        if built.get(str(f)):
            rows.append({"name": f"{f.parent.name}/{f.stem}", "correct": False, "speedup_eager": None,
                         "speedup_compile": None, "precision": None, "error": built[str(f)]})
        else:
            rows.append(run_one(f, args.runs, args.compile, args.precision))
        r = rows[-1]
        sp = r.get("speedup_eager")
        gsp = r.get("speedup_graph")
        print(f"{r['name']:50s} {'ok ' if r['correct'] else 'BAD'} eager {sp or 0:6.2f}x graph {gsp or 0:6.2f}x "
              f"{(r.get('error') or '')[:160]}", flush=True)
    rows = kept + rows
    summary = summarize(rows)
    print(json.dumps(summary, indent=1))
    device = torch.cuda.get_device_name().replace(" ", "_")
    out = Path(args.out or ROOT / "benchmarks" / "results" / f"suite-{device}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    from argus_agent.lower.precision import resolve

    out.write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                               "date": datetime.date.today().isoformat(),
                               "precision": resolve(args.precision).describe(), "summary": summary,
                               "problems": rows},
                              indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
