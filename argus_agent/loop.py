"""The optimize loop: plan -> edit (codemod or LLM edit) -> build and fit -> verify -> test -> time -> reward.

    result = optimize("problem.py", target="cpu", budget=8, out_dir="out/")

Every candidate goes into the history; a run interrupted half way resumes from its recorded candidates (the
planner replays the recorded steps, so a seeded offline run continues exactly as it would have).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from .codemods import CodemodError, NotApplicable, apply_codemod
from .evaluate import Evaluation, gpu_status
from .history import History
from .kb import load_kb
from .lower.candidate import lower_problem
from .planner import Context, OfflinePlanner, Step, describe_action, digest
from .problem import ProblemError, load_problem
from .sandbox import Sandbox


@dataclass
class Outcome:
    outcome: str
    message: str = ""
    verdict: dict = field(default_factory=dict)
    evaluation: Evaluation | None = None
    counterexamples: list = field(default_factory=list)
    stage_seconds: dict = field(default_factory=dict)   # the sandbox's seconds per stage (build, verify, ...)

    @property
    def correct(self) -> bool:
        return self.outcome == "correct"


class Session:
    """One problem on one target: its reference, tolerance, candidate directory and sandbox."""

    def __init__(self, problem_path, target: str = "cpu", cpu_scale: int = 1, work_dir: Path | None = None,
                 warmup: int = 20, runs: int = 100, seed: int = 0, stage_timeout=None):
        from .sandbox import warm_up

        warm_up()   # the candidates' fork server starts while the problem is captured and lowered
        self.gpu, self.gpu_why = gpu_status()
        self.target = target
        cpu = not self.gpu or target == "cpu"
        try:
            self.problem = load_problem(problem_path, cpu=cpu, cpu_scale=cpu_scale)
        except ProblemError:
            raise
        except Exception as e:  # the problem's own code raised (get_inputs, Model.__init__...): say where
            raise ProblemError(located(e, problem_path)) from e
        self.pattern = lower_problem(self.problem, target)
        self.problem.ops = self.pattern.ops
        self.tol = self.pattern.tol
        from .history import default_db

        self.work_dir = Path(work_dir or default_db().parent / "candidates")
        self.warmup, self.runs, self.seed = warmup, runs, seed
        self.trials = 0
        self.sandbox = Sandbox(self.problem, problem_path, target, cpu=cpu, cpu_scale=cpu_scale, gpu=self.gpu,
                               gpu_why=self.gpu_why, tol=self.tol, seed=seed, work_dir=self.work_dir, warmup=warmup,
                               runs=runs, limits=stage_timeout)

    def first_source(self) -> str:
        return self.pattern.source

    def check(self, source: str, time_it: bool = True) -> Outcome:
        """Build, fit, verify, test and (on a GPU) time one candidate source, in a child process."""
        self.trials += 1
        res = self.sandbox.check(source, trial_seed=self.trials, time_it=time_it)
        return Outcome(res.outcome, res.message, res.verdict, res.evaluation, res.counterexamples,
                       dict(res.stage_seconds or {}))

    def feasibility(self, source: str, target: str | None = None, directory=None) -> str:
        """'' when every kernel of `source` builds, fits the target and verifies (the tuner's stage 1), else why
        not. The verdict is remembered (`gates.verify_cached`), so the point's evaluation does not verify again."""
        res = self.sandbox.check(source, stages=("build", "verify"))
        return "" if res.outcome in ("built", "verified") else res.message or res.outcome

    def feasibility_many(self, sources: list[str]) -> list[str]:
        """`feasibility` of several sources at once, each in its own child (compiles and verifier runs are CPU
        work, independent per point: the tuner's stage 1 for a batch takes about as long as its slowest point)."""
        import os
        from concurrent.futures import ThreadPoolExecutor

        workers = max(1, min(len(sources), 8, (os.cpu_count() or 2) - 1))
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(self.feasibility, sources))


def located(e: BaseException, path) -> str:
    """`file:line: <what raised>` for an exception raised by the problem file's code, with a hint."""
    import traceback

    target = str(Path(path).resolve())
    frames = [f for f in traceback.extract_tb(e.__traceback__) if str(Path(f.filename).resolve()) == target]
    where = f"{path}:{frames[-1].lineno}" if frames else str(path)
    func = f"{frames[-1].name}() " if frames else ""
    first = str(e).splitlines()[0] if str(e) else ""
    return (f"{where}: {func}raised {type(e).__name__}: {first}; hint: run the file's get_inputs(), "
            "get_init_inputs() and Model(*get_init_inputs()) on their own to debug it")


def reward(out: Outcome, best_speedup: float | None) -> float:
    """+1 for a correct, verified candidate, plus log(speedup / best so far) when timed; 0 when rejected."""
    if not out.correct:
        return 0.0
    sp = out.evaluation.speedup if out.evaluation else None
    if sp and best_speedup:
        return 1.0 + max(-2.0, min(2.0, math.log(sp / best_speedup)))
    return 1.0


@dataclass
class RunResult:
    run_id: int
    status: str
    best_source: str
    best_candidate: int | None     # the best candidate's iteration (#N in every listing)
    best_speedup: float | None
    timing: str
    steps: list
    summary: dict
    out_dir: Path | None = None


class RunAborted(Exception):
    """The run cannot go on (the LLM endpoint is unreachable); it is recorded as `aborted`."""


def default_out_dir(problem_name: str, run_id: int) -> Path:
    from .history import default_home

    return default_home() / "runs" / f"{run_id}-{problem_name}"


def optimize(problem_path, target: str = "cpu", budget: int = 8, out_dir: str | Path | None = None,
             planner=None, history: History | None = None, seed: int = 0, cpu_scale: int = 1,
             kb_dir=None, progress=None, resume: bool = True, tune_evals: int | None = None,
             stage_timeout=None, force: bool = False, on_ablation=None) -> RunResult:
    """Optimize one problem; raises LoweringError / ProblemError before any run is recorded, OutDirError when
    `out_dir` holds another problem's outputs (unless `force`), RunBusy when an identical run is live, and
    RunAborted when the planner gives up on its service (the run is then recorded as aborted).

    Outputs go to `out_dir`, by default `$ARGUS_HOME/runs/<run id>-<problem>/`."""
    from .outdir import check_out_dir

    history = history or History()
    planner = planner or OfflinePlanner(seed)
    session = Session(problem_path, target, cpu_scale, seed=seed,
                      work_dir=Path(history.path).parent / "candidates", stage_timeout=stage_timeout)
    problem = session.problem
    if out_dir is not None:
        check_out_dir(Path(out_dir), problem, force)
    kb = load_kb(kb_dir)
    config = {"budget": budget, "cpu_scale": cpu_scale, "kb": str(kb_dir or "")}
    key = json.dumps([problem.digest, target, planner.name, seed, config])
    with history.key_lock(key):
        run_id = history.find_unfinished(problem.digest, target, planner.name, seed, config) if resume else None
        resumed = run_id is not None
        if run_id is None:
            run_id = history.start_run(problem.name, str(Path(problem_path).resolve()), problem.digest, target,
                                       budget, planner.name, seed, config)
    try:
        return _optimize(session, history, planner, kb, run_id, resumed, target, budget, seed, tune_evals,
                         Path(out_dir) if out_dir is not None else default_out_dir(problem.name, run_id), force,
                         progress, on_ablation)
    except RunAborted as e:
        history.finish_run(run_id, "aborted", None, {"problem": problem.name, "aborted": str(e)})
        raise
    except BaseException as e:  # Ctrl-C, a crash: the run is marked so, and the same command resumes it
        history.mark_interrupted(run_id, f"{type(e).__name__}: {e}")
        raise


def _optimize(session, history, planner, kb, run_id, resumed, target, budget, seed, tune_evals, out_dir, force,
              progress, on_ablation) -> RunResult:
    problem = session.problem
    steps, records = [], history.candidates(run_id)
    current, current_id, best = None, None, None  # best: (row id, iteration, source, speedup)
    seen: dict = {}   # source digest -> (iteration, Outcome): a known source is not evaluated again
    for rec in records:  # resume: replay what was recorded
        outcome = rec["evaluation"].get("outcome", rec["verdict"]) or "?"
        step = Step(rec["iteration"], rec["action"], outcome,
                    rec["error"], rec["findings"].get("counterexamples", []) if isinstance(rec["findings"], dict)
                    else [], rec["speedup"], rec["reward"], rec["evaluation"].get("parent_digest", ""))
        steps.append(step)
        planner.observe(step)
        seen.setdefault(digest(rec["source"]), (rec["iteration"], Outcome(
            outcome, rec["error"] or "", evaluation=Evaluation(bool(rec["correct"]), rec["error"] or "",
                                                               speedup=rec["speedup"]))))
        if rec["correct"]:
            current, current_id = rec["source"], rec["id"]
            if best is None or (rec["speedup"] or 0) >= (best[3] or 0):
                best = (rec["id"], rec["iteration"], rec["source"], rec["speedup"])
    timing = session.gpu_why and f"skipped: {session.gpu_why}" or ""
    tune_evals = tune_evals or (16 if session.gpu else 4)

    def check(source: str) -> Outcome:
        d = digest(source)
        if d in seen:
            it, prev = seen[d]
            return Outcome(prev.outcome, f"same source as #{it} (not evaluated again): {prev.message}",
                           prev.verdict, prev.evaluation, prev.counterexamples)
        return session.check(source)

    def record(iteration, action, source, out: Outcome, parent, parent_digest, extra=None) -> Step:
        nonlocal current, current_id, best
        sp = out.evaluation.speedup if out.evaluation else None
        r = reward(out, best[3] if best else None)
        ev = (out.evaluation.to_dict() if out.evaluation else {}) | {"outcome": out.outcome,
                                                                     "parent_digest": parent_digest,
                                                                     "stage_seconds": out.stage_seconds} | (extra or {})
        verdict = dict(out.verdict) | {"counterexamples": out.counterexamples,
                                       "status": out.verdict.get("status", out.outcome)}
        cid = history.add_candidate(run_id, iteration, parent, action, source, verdict, out.message, out.correct,
                                    ev, sp, r)
        if action.get("kind") != "invalid":
            seen.setdefault(digest(source), (iteration, out))
        step = Step(iteration, action, out.outcome, out.message, out.counterexamples, sp, r, parent_digest)
        steps.append(step)
        planner.observe(step)
        if out.correct:
            better = best is None or (sp or 0) > (best[3] or 0) or (sp is None and (best[3] is None))
            if better:
                best = (cid, iteration, source, sp)
            if sp is None or better:
                current, current_id = source, cid
        return step

    iteration = len(records)
    if iteration == 0:
        first = session.first_source()
        out0 = check(first)
        record(0, {"kind": "template", "pattern": session.pattern.describe()}, first, out0, None, "")
        if progress:
            progress(steps[-1])
        iteration = 1
        if not out0.correct:
            current = first  # the planner may still repair it (LLM edits)
    if current is None:
        current = next((r["source"] for r in records if r["action"].get("kind") == "template"), session.first_source())
    status = "done"
    while iteration < budget:
        applicable = kb.applicable(current, session.pattern.kind, target)
        ctx = Context(problem.source, current, target, applicable, steps, timing, iteration)
        action = planner.propose(ctx)
        here = digest(current)
        if action["kind"] == "stop":
            status = "done"
            break
        if action["kind"] == "abort":
            record(iteration, {"kind": "invalid", "outcome": action["outcome"]}, current,
                   Outcome(action["outcome"], action["message"]), current_id, here)
            if progress:
                progress(steps[-1])
            raise RunAborted(action["message"])
        if action["kind"] == "invalid":
            out = Outcome(action["outcome"], action["message"])
            record(iteration, {"kind": "invalid", "outcome": action["outcome"]}, current, out, current_id, here)
        elif action["kind"] == "tune":
            from .tuner import tune

            res = tune(current, lambda s: check(s).evaluation or Evaluation(False, "rejected"), target,
                       session.work_dir, max_evals=tune_evals, seed=seed, feasible=session.feasibility,
                       feasible_many=session.feasibility_many)
            out = check(res.best_source)
            record(iteration, {"kind": "tune", "point": res.best_point, "method": res.method}, res.best_source, out,
                   current_id, here, {"tuning": res.to_dict()})
        else:
            try:
                if action["kind"] == "skill":
                    skill = kb.skills[action["skill"]]
                    new = apply_codemod(current, skill.codemod, skill.variants[action.get("variant", 0)])
                else:
                    new = action["source"]
                out = check(new)
            except NotApplicable as e:
                new, out = current, Outcome("not-applicable", str(e))
            except CodemodError as e:
                new, out = current, Outcome("rejected", str(e))
            record(iteration, action, new, out, current_id, here)
        if progress:
            progress(steps[-1])
        iteration += 1
    best_row, best_it, best_source, best_speedup = best if best else (None, None, current, None)
    summary = {"problem": problem.name, "problem_path": str(problem.path.resolve()),
               "problem_digest": problem.digest, "target": target, "pattern": session.pattern.describe(),
               "precision": getattr(session.pattern, "precision", None),
               "iterations": len(steps), "best_candidate": best_it, "best_speedup": best_speedup,
               "timing": timing or "timed on the GPU", "resumed": resumed, "correct": best is not None,
               "steps": [{"iteration": s.iteration, "action": describe_action(s.action), "outcome": s.outcome,
                          "speedup": s.speedup, "reward": s.reward} for s in steps]}
    written = None
    if best is not None:
        from .emit import write_outputs
        from .outdir import backup_outputs

        backup_outputs(out_dir)
        write_outputs(out_dir, problem, best_source, summary)
        written = out_dir
        history.set_ablations(run_id, ablate(session, history.candidates(run_id), best_row, on_ablation))
    history.finish_run(run_id, status if best else "failed", best_it, summary)
    return RunResult(run_id, status if best else "failed", best_source, best_it, best_speedup, timing, steps, summary,
                     written)


def ablate(session: Session, candidates: list, best_id: int, progress=None) -> list[dict]:
    """For each distinct skill on the best kernel's lineage, one evaluation: the lineage replayed without it,
    from the last recorded source before its first use. `progress(i, n, row)` after each."""
    by_id = {c["id"]: c for c in candidates}
    chain, c = [], by_id.get(best_id)
    while c is not None:
        chain.append(c)
        c = by_id.get(c["parent"])
    chain.reverse()
    if not chain or chain[0]["action"].get("kind") != "template":
        return []
    kb = load_kb()
    rows, done = [], set()
    steps = chain[1:]
    todo = []
    for i, c in enumerate(steps):
        a = c["action"]
        name = a.get("skill") if a.get("kind") == "skill" else None
        if name is None:
            rows.append({"removed": f"#{c['iteration']} {describe_action(a)}", "correct": False, "speedup": None,
                         "note": "not replayable (an edit or the tuner)"})
        elif name not in done:
            done.add(name)
            todo.append((i, name))
    for n, (i, name) in enumerate(todo, start=1):
        src = chain[i]["source"]  # the lineage up to the skill's first use, as recorded
        note = ""
        for other in steps[i + 1:]:
            oa = other["action"]
            if oa.get("kind") == "skill" and oa["skill"] != name and oa["skill"] in kb.skills:
                sk = kb.skills[oa["skill"]]
                try:
                    src = apply_codemod(src, sk.codemod, sk.variants[oa.get("variant", 0)])
                except (NotApplicable, CodemodError) as e:
                    note = f"{oa['skill']} no longer applies: {str(e).splitlines()[0] if str(e) else e}"
        out = session.check(src)
        uses = [f"#{c['iteration']}" for c in steps if c["action"].get("skill") == name]
        row = {"removed": f"{name} ({', '.join(uses)})", "correct": out.correct,
               "speedup": out.evaluation.speedup if out.evaluation else None,
               "note": note or out.message.splitlines()[0][:300] if out.message else note}
        rows.append(row)
        if progress:
            progress(n, len(todo), row)
    return rows


def dumps(result: RunResult) -> str:
    return json.dumps({"run_id": result.run_id, "status": result.status, "best_candidate": result.best_candidate,
                       "best_speedup": result.best_speedup, "timing": result.timing,
                       "out_dir": str(result.out_dir) if result.out_dir else None, **result.summary}, indent=2)
