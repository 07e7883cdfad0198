"""`argus suite DIR`: every problem file in DIR through the optimize pipeline, spread over the host's GPUs or
a Ray cluster, into one SQLite history.

    rows, fp = run_suite("problems/", target="sm_90a", budget=8, workers=None)   # one worker per GPU

A problem is a task: its file's text goes to a worker, which runs `optimize` against a history of its own
(a scratch database) and sends back the row (correct, speedup over eager and over `torch.compile`, precision,
error) and the run's records, which the coordinator merges into the suite's history. So the same code path
serves local worker processes (one per GPU, each seeing only its GPU through CUDA_VISIBLE_DEVICES) and Ray
tasks on other hosts (`num_gpus=1`), and only the coordinator writes the history. A problem the pipeline
cannot handle is a row with `error` set (naming the op, or what raised), never a crash. Resuming (the default)
continues the newest unfinished suite with the same problems and settings, skipping the problems it has.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import tempfile
import time
import traceback
from pathlib import Path

from .history import History
from .report import fast_p, solved_share


class SuiteError(Exception):
    """The suite cannot start (no problems in DIR, no Ray)."""


def problem_files(directory: Path) -> list[Path]:
    """The problem files of a suite: `*.py` under DIR (recursively), minus `__init__.py` and `_private.py`."""
    directory = Path(directory)
    if not directory.is_dir():
        raise SuiteError(f"{directory}: not a directory; hint: pass the directory that holds the problem files")
    files = sorted(p for p in directory.rglob("*.py") if not p.name.startswith("_") and "__pycache__" not in p.parts)
    if not files:
        raise SuiteError(f"{directory}: holds no problem files (*.py); hint: KernelBench-format files define "
                         "Model, get_inputs and get_init_inputs")
    return files


def problem_name(directory: Path, path: Path) -> str:
    return str(path.relative_to(directory).with_suffix(""))


def gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


# ---------------------------------------------------------------------------------------------- one problem
def run_task(task: dict) -> dict:
    """Run one problem (a dict: name, source, target, budget, seed, stage_timeout) in this process against a
    scratch history; returns {"row": ..., "export": the run's records or None}. Never raises."""
    t0 = time.monotonic()
    row = {"name": task["name"], "path": task.get("path"),
           "digest": hashlib.sha256(task["source"].encode()).hexdigest()[:16], "correct": False,
           "speedup_eager": None, "speedup_compile": None, "precision": None, "error": None,
           "worker": task.get("worker") or f"pid {os.getpid()}"}
    export = None
    with tempfile.TemporaryDirectory(prefix="argus-suite-") as tmp:
        tmp = Path(tmp)
        path = tmp / (Path(task["name"]).name + ".py")
        path.write_text(task["source"])
        history = History(tmp / "history.db")
        try:
            row.update(_optimize_one(path, task, history, tmp))
            runs = history.runs(1)
            if runs:
                export = export_run(history, runs[0]["id"])
        except Exception as e:  # a pipeline bug on one problem is that problem's row, not the suite's end
            row["error"] = _error_line(e)
            runs = history.runs(1)
            if runs:
                export = export_run(history, runs[0]["id"])
        finally:
            history.close()
    row["seconds"] = round(time.monotonic() - t0, 2)
    return {"row": row, "export": export}


def _optimize_one(path: Path, task: dict, history: History, tmp: Path) -> dict:
    from .loop import optimize
    from .lower import LoweringError
    from .problem import ProblemError

    try:
        result = optimize(path, target=task["target"], budget=task["budget"], history=history, seed=task["seed"],
                          stage_timeout=task.get("stage_timeout"), out_dir=tmp / "out", resume=False, force=True)
    except (LoweringError, ProblemError) as e:
        return {"error": str(e).splitlines()[0]}
    s = result.summary
    out = {"correct": result.best_candidate is not None, "speedup_eager": result.best_speedup,
           "precision": s.get("precision")}
    if not out["correct"]:
        last = next((st for st in reversed(result.steps) if st.outcome != "correct"), None)
        out["error"] = f"no correct candidate: {last.outcome}: {last.message.splitlines()[0][:300]}" if last else \
            "no correct candidate"
    elif result.best_speedup is not None:
        out["speedup_compile"] = _over_compile(path, task, result.best_speedup)
    return out


def _over_compile(path: Path, task: dict, speedup_eager: float) -> float | None:
    """speedup over torch.compile(Model) = speedup over eager x (compiled time / eager time), both measured on
    the base shape here; None where torch.compile fails."""
    import torch

    from .evaluate import timing_sets
    from .problem import load_problem
    from .sandbox import time_forward

    try:
        problem = load_problem(path, cpu=False)
        model = problem.make_model().cuda()
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.base_inputs]
        more = timing_sets(problem, problem.shapes(1)[0], 0, "cuda", inputs)  # rotated as the speed-up's own
        eager = time_forward(model, inputs, 10, 50, more)
        compiled = torch.compile(model)
        with torch.no_grad():
            compiled(*inputs)
        comp = time_forward(compiled, inputs, 10, 50, more)
        return speedup_eager * comp / eager
    except Exception:
        return None


def _error_line(e: BaseException) -> str:
    tb = traceback.extract_tb(e.__traceback__)
    where = f" ({Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}{where}"


def export_run(history: History, run_id: int) -> dict:
    run = history.run(run_id)
    return {"run": run, "candidates": history.candidates(run_id), "ablations": history.ablations(run_id)}


def import_run(history: History, export: dict) -> int:
    """Insert a run exported from another history; returns its id here (candidate parents are remapped)."""
    r = export["run"]
    cur = history.db.execute(
        "INSERT INTO runs (problem, problem_path, problem_digest, target, budget, planner, seed, status, started, "
        "finished, best_candidate, config, summary) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (r["problem"], r["problem_path"], r["problem_digest"], r["target"], r["budget"], r["planner"], r["seed"],
         r["status"], r["started"], r["finished"], r["best_candidate"], json.dumps(r["config"]),
         json.dumps(r["summary"])))
    run_id = cur.lastrowid
    ids: dict = {}
    for c in export["candidates"]:
        cur = history.db.execute(
            "INSERT INTO candidates (run_id, iteration, parent, action, source, verdict, findings, error, correct, "
            "evaluation, speedup, reward, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (run_id, c["iteration"], ids.get(c["parent"]), json.dumps(c["action"]), c["source"], c["verdict"],
             json.dumps(c["findings"]), c["error"], c["correct"], json.dumps(c["evaluation"]), c["speedup"],
             c["reward"], c["created"]))
        ids[c["id"]] = cur.lastrowid
    history.db.commit()
    history.set_ablations(run_id, export["ablations"])
    return run_id


# ---------------------------------------------------------------------------------------------- spreading out
def _worker_main(gpu, tasks, results):
    """A local worker: one GPU (CUDA_VISIBLE_DEVICES, set before CUDA starts), tasks until the queue is empty."""
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
    while True:
        try:
            task = tasks.get(timeout=1)
        except queue.Empty:
            return
        if task is None:
            return
        task["worker"] = f"gpu {gpu}" if gpu is not None else f"worker pid {os.getpid()}"
        results.put(run_task(task))


def _run_local(tasks: list[dict], workers: int, gpus: int, on_result):
    if workers <= 1 and gpus <= 1:
        for t in tasks:
            t["worker"] = "gpu 0" if gpus else "in process"
            on_result(run_task(t))
        return
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    q_tasks, q_results = ctx.Queue(), ctx.Queue()
    for t in tasks:
        q_tasks.put(t)
    n = workers
    # Not daemonic: a worker starts the sandbox's children (joined or killed below).
    procs = [ctx.Process(target=_worker_main, args=(i if gpus else None, q_tasks, q_results)) for i in range(n)]
    from .sandbox import without_main

    with without_main():
        for p in procs:
            p.start()
    got = 0
    try:
        while got < len(tasks):
            try:
                res = q_results.get(timeout=5)
            except queue.Empty:
                if not any(p.is_alive() for p in procs):
                    break   # a worker died: the problems it held stay missing, and a resume runs them again
                continue
            got += 1
            on_result(res)
    finally:
        for p in procs:
            p.join(10 if got >= len(tasks) else 0)
            if p.is_alive():
                p.kill()
                p.join(5)


def _run_ray(tasks: list[dict], address: str, gpu: bool, on_result):
    try:
        import ray
    except ImportError as e:
        raise SuiteError("--ray needs Ray: pip install 'argus-agent[cluster]'") from e
    if not ray.is_initialized():
        kwargs = {"address": address} if address not in ("", "local") else {"num_cpus": os.cpu_count() or 2}
        ray.init(ignore_reinit_error=True, log_to_driver=False, include_dashboard=False, **kwargs)
    remote = ray.remote(num_gpus=1 if gpu else 0, num_cpus=1, max_retries=1)(_ray_task)
    pending = {remote.remote(t): t for t in tasks}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            t = pending.pop(ref)
            try:
                on_result(ray.get(ref))
            except Exception as e:  # the task's process died: the problem's row says so
                on_result({"row": {"name": t["name"], "path": t.get("path"), "correct": False,
                                   "error": f"the Ray task failed: {_error_line(e)}", "worker": "ray"},
                           "export": None})


def _ray_task(task: dict) -> dict:
    import ray

    ids = ray.get_gpu_ids()
    task["worker"] = f"ray node {ray.get_runtime_context().get_node_id()[:8]}" + (f" gpu {ids[0]}" if ids else "")
    return run_task(task)


# ---------------------------------------------------------------------------------------------- the suite
def run_suite(directory, target: str = "cpu", budget: int = 8, *, history: History | None = None, seed: int = 0,
              workers: int | None = None, ray_address: str | None = None, resume: bool = True,
              stage_timeout=None, progress=None) -> tuple[int, list[dict], dict]:
    """(suite id, rows in name order, fast_p). `workers`: local worker processes (default: one per GPU for a
    GPU target, else 1); `ray_address`: run on Ray instead ('local' starts a local instance)."""
    directory = Path(directory).resolve()
    files = problem_files(directory)
    history = history or History()
    sources = {problem_name(directory, p): p.read_text() for p in files}
    key = hashlib.sha256(json.dumps([sorted((n, hashlib.sha256(s.encode()).hexdigest()) for n, s in
                                            sources.items()), target, budget, seed]).encode()).hexdigest()[:16]
    config = {"seed": seed, "stage_timeout": stage_timeout, "problems": len(files)}
    suite_id, _ = history.start_suite(str(directory), key, target, budget, config, resume)
    have = {r["name"] for r in history.suite_problems(suite_id)}
    tasks = [{"name": n, "path": str(directory / (n + ".py")), "source": s, "target": target, "budget": budget,
              "seed": seed, "stage_timeout": stage_timeout} for n, s in sources.items() if n not in have]
    gpus = gpu_count() if target != "cpu" else 0
    done = [len(have)]

    def on_result(res: dict):
        row = dict(res["row"])
        if res.get("export"):
            row["run_id"] = import_run(history, res["export"])
        history.add_suite_problem(suite_id, row)
        done[0] += 1
        if progress:
            progress(done[0], len(files), row)

    if ray_address is not None:
        _run_ray(tasks, ray_address, gpus > 0, on_result)
    else:
        _run_local(tasks, workers or max(1, gpus), gpus, on_result)
    rows = history.suite_problems(suite_id)
    history.finish_suite(suite_id, "done" if len(rows) == len(files) else "incomplete")
    return suite_id, rows, fast_p(rows)


def suite_json(rows: list[dict]) -> dict:
    """Per-problem rows, fast_p, the solved share, and the precision the suite ran at (--precision, or PyTorch's
    settings; each row's own `precision` says what its program computed at)."""
    from .lower.precision import resolve

    keys = ("name", "correct", "speedup_eager", "speedup_compile", "precision", "error")
    return {"problems": [{k: r.get(k) for k in keys} for r in rows], "fast_p": fast_p(rows),
            "solved": solved_share(rows), "precision": resolve(None).describe()}


def suite_table(rows: list[dict]) -> str:
    width = max([len(r["name"]) for r in rows] + [7])
    lines = [f"{'problem':<{width}}  correct  vs eager  vs compile  precision / error"]
    for r in rows:
        sp = f"{r['speedup_eager']:.3f}x" if r.get("speedup_eager") else "-"
        sc = f"{r['speedup_compile']:.3f}x" if r.get("speedup_compile") else "-"
        tail = r.get("error") or r.get("precision") or ""
        lines.append(f"{r['name']:<{width}}  {'yes' if r['correct'] else 'no':<7}  {sp:>8}  {sc:>10}  {tail}")
    fp = fast_p(rows)
    solved = solved_share(rows)
    lines.append("")
    lines.append("  ".join(f"{k} {'-' if v is None else f'{v:.0%}'}" for k, v in fp.items())
                 + f"  solved {'-' if solved is None else f'{solved:.0%}'} (correct and >= 0.8x eager)")
    return "\n".join(lines)
