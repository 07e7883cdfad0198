"""conv_tma's epilogue forms A/B on the GPU, in one run: each problem lowered with the staged epilogue and the
subsampled strided 1x1 off ("before"), the staged epilogue alone ("staged"), both ("after"), and both with
narrow groups merged ("merged", ARGUS_CONV_MERGE_GROUPS's form); per form the
check against eager, the median of --runs timed calls (eager-launched and CUDA-graph-replayed) beside eager
PyTorch's, and the CUDA kernels' times under torch.profiler.

    python benchmarks/conv_epilogue_ab.py tests/problems/level3/020_resnext_block.py [...] --runs 20 --out F

Phase 1 lowers every (problem, form) and compiles its kernels in worker processes; each writes its program to a
fixed path, so phase 2 (this process, one problem at a time on the GPU) loads the same files and finds every
kernel in the on-disk cache (a kernel's cache key holds its source file's path).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import multiprocessing as mp
import os
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
warnings.filterwarnings("ignore")

FORMS = {"before": dict(staged=False, subsample=False, merge=False),
         "staged": dict(staged=True, subsample=False, merge=False),
         "after": dict(staged=True, subsample=True, merge=False),
         "merged": dict(staged=True, subsample=True, merge=True)}


def _set_form(form: str):
    from argus_agent.lower import ops_nn
    from stdlib_kernels import conv_tma

    conv_tma.STAGED_EPILOGUE = FORMS[form]["staged"]
    ops_nn.CONV_SUBSAMPLE = FORMS[form]["subsample"]
    ops_nn.CONV_MERGE_GROUPS = FORMS[form]["merge"]


def _paths(work: Path, path: str, form: str) -> tuple[Path, Path]:
    stem = f"ab_{Path(path).stem}_{form}"
    return work / f"{stem}.py", work / f"{stem}.json"


def _build(work: str, path: str, form: str) -> str:
    """Worker: lower the problem in this form, write the program, compile its kernels; '' or the error."""
    warnings.filterwarnings("ignore")
    try:
        import tilepy_hip
        from argus_agent.lower.candidate import lower_problem
        from argus_agent.problem import load_problem

        _set_form(form)
        first = lower_problem(load_problem(path, cpu=False), "sm_90a", None)
        src, meta = _paths(Path(work), path, form)
        src.write_text(first.source)
        meta.write_text(json.dumps({"tol": first.tol, "precision": str(first.precision),
                                    "kernels": len(first.program.kernels)}))
        for k in _kernels(_load(src)):
            tilepy_hip.compile(k, target="sm_90a")
        return ""
    except Exception as e:
        return f"{type(e).__name__}: {str(e).strip()[:600]}"


def _kernels(mod):
    import tilepy as tp

    return [v for v in vars(mod).values() if isinstance(v, tp.Kernel)]


def _load(p: Path):
    spec = importlib.util.spec_from_file_location(p.stem, p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _measure(work: Path, path: str, forms: list, runs: int, done=None) -> list:
    import torch
    from conv_profile import kernel_times
    from suite import _median_ms

    from argus_agent.problem import load_problem

    problem = load_problem(path, cpu=False)
    model = problem.make_model().cuda()
    inputs = problem.draw_inputs(problem.shapes(1)[0], torch.Generator().manual_seed(7), "cuda")
    name = f"{Path(path).parent.name}/{Path(path).stem}"
    rows = []
    with torch.no_grad():
        ref = model(*inputs)
        eager_ms = _median_ms(lambda: model(*inputs), runs)
        eager_k = kernel_times(lambda: model(*inputs), 10)
        for form in forms:
            src, meta = _paths(work, path, form)
            row = {"name": name, "form": form, "eager_ms": eager_ms, "eager_us": eager_k}
            try:
                row.update(json.loads(meta.read_text()))
                mod = _load(src)
                out = mod.argus_forward(model, *inputs)
                torch.cuda.synchronize()
                row["max_err"] = float((out.double() - ref.double()).abs().max())
                row["correct"] = bool(torch.allclose(out.double(), ref.double(), atol=row["tol"], rtol=row["tol"]))
                row["ours_ms"] = _median_ms(lambda m=mod: m.argus_forward(model, *inputs), runs)
                row["speedup_eager"] = eager_ms / row["ours_ms"]
                try:
                    from tilepy_hip.graphs import capture

                    graph = capture(lambda *xs, m=mod: m.argus_forward(model, *xs), *inputs)
                    row["graph_ms"] = _median_ms(graph.replay, runs)
                    row["speedup_graph"] = eager_ms / row["graph_ms"]
                except Exception as e:
                    row["graph_error"] = f"{type(e).__name__}: {str(e)[:200]}"
                row["ours_us"] = kernel_times(lambda m=mod: m.argus_forward(model, *inputs), 10)
            except Exception as e:
                row["error"] = f"{type(e).__name__}: {str(e).strip()[:600]}"
            rows.append(row)
            if done is not None:        # written row by row: a timeout keeps what was measured
                done(row)
            print(f"== {name} {form}: {'ok ' if row.get('correct') else 'BAD'} ours {row.get('ours_ms', 0):.3f} ms"
                  f" graph {row.get('graph_ms', 0):.3f} ms eager {eager_ms:.3f} ms -> "
                  f"{row.get('speedup_eager', 0):.2f}x / {row.get('speedup_graph', 0):.2f}x "
                  f"{row.get('error', '')[:200]}", flush=True)
            for k, v in list(row.get("ours_us", {}).items())[:7]:
                print(f"     {v:8.1f} us  {k}", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--forms", default="before,staged,after,merged")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 4))
    ap.add_argument("--out", default=None)
    ap.add_argument("--phase", choices=("all", "build", "measure"), default="all",
                    help="build: phase 1 alone (beside other work), measure: phase 2 on a --work of a build")
    ap.add_argument("--work", default=None, help="the programs' folder (default: a new temporary one)")
    args = ap.parse_args()
    forms = args.forms.split(",")
    work = Path(args.work or tempfile.mkdtemp(prefix="argus-conv-ab-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.phase != "measure":
        jobs = [(str(work), f, form) for f in args.files for form in forms]
        with mp.get_context("spawn").Pool(min(args.jobs, len(jobs))) as pool:
            errors = pool.starmap(_build, jobs, chunksize=1)
        for (_, f, form), err in zip(jobs, errors):
            print(f"build {f} {form}: {err or 'ok'}", flush=True)
    if args.phase == "build":
        return
    import torch

    rows = []

    def done(row):
        rows.append(row)
        if args.out:
            Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                                  "date": datetime.date.today().isoformat(), "runs": args.runs,
                                                  "forms": {k: FORMS[k] for k in forms}, "rows": rows}, indent=1))
    for f in args.files:
        _measure(work, f, forms, args.runs, done)


if __name__ == "__main__":
    main()
