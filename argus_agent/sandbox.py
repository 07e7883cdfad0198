"""Candidates run in a child process; the verdict is computed in the parent.

    box = Sandbox(problem_path, target="cpu", limits={"test": 60})
    out = box.check(source)       # -> SandboxResult: outcome, message, verdict, evaluation

The parent checks the source against the candidate language (`policy.py`) before anything of it runs. Each
trial has a seed (`evaluate.trial_plan`): the parent and the child draw the same fresh inputs from it on the
device (on the GPU target they are made on the GPU; nothing of them crosses a file), and the parent computes
the reference with its own torch. The child (forked from a clean fork server that has torch and tilepy
imported, so a child starts in milliseconds and no candidate ever shares a process with another) imports the
candidate, builds and fits its kernels, verifies them, runs ModelNew.forward under the guard on each trial,
and writes each output and the parameters back (`torch.save`, a file per trial; the parent reads them with
`weights_only=True`, so a file holds tensors and nothing that runs) with the facts only it can see: whether
an output is (a view of) an input or an earlier call's output, whether the inputs were written
(`evaluate.trial_facts`). The parent judges (`evaluate.judge_facts`): those facts, shapes, values against its
own reference, parameters. Only a correct candidate is timed, by the child, with the same wall-clock bound as
the reference (a device-wide synchronize ends every measurement, so work on another stream or left for later
is counted).

Each stage (build, verify, test, time) has a wall-clock limit; the child reports when it enters a stage, and
a child that overruns its stage is killed and the candidate recorded as `timeout`. Messages from the child are
JSON over a pipe (never pickles: nothing the child sends can run code in the parent).
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .lower.precision import matching_reference

STAGES = ("build", "verify", "test", "time")
N_SHAPES = 3      # shape variants per evaluation (a lowered program has one: its base shape)
DEFAULT_LIMITS = {"build": 300.0, "verify": 300.0, "test": 600.0, "time": 300.0}
PRELOAD = ["torch", "tilepy", "argus_agent.gates", "argus_agent.candidate", "argus_agent.evaluate",
           "argus_agent.runtime"]
_CONTEXT = None


@dataclass
class SandboxResult:
    outcome: str                       # correct | forbidden | import-error | ... | test-failed | timeout | crashed
    message: str = ""
    verdict: dict = field(default_factory=dict)
    counterexamples: list = field(default_factory=list)
    evaluation: object = None          # evaluate.Evaluation when the candidate was tested
    stage_seconds: dict = field(default_factory=dict)


def context():
    """The multiprocessing context: a fork server preloaded with torch and tilepy (spawn where there is none)."""
    global _CONTEXT
    if _CONTEXT is None:
        if "forkserver" in multiprocessing.get_all_start_methods():
            _CONTEXT = multiprocessing.get_context("forkserver")
            _CONTEXT.set_forkserver_preload(PRELOAD)
        else:  # pragma: no cover - Windows
            _CONTEXT = multiprocessing.get_context("spawn")
    return _CONTEXT


def warm_up():
    """Start the fork server now: it imports torch and tilepy (seconds) while the caller captures and lowers the
    problem, instead of when the first candidate is checked."""
    ctx = context()
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        with without_main():
            forkserver.ensure_running()


def limits_from(stage_timeout: float | dict | None) -> dict:
    if stage_timeout is None:
        return dict(DEFAULT_LIMITS)
    if isinstance(stage_timeout, dict):
        return DEFAULT_LIMITS | stage_timeout
    return {s: float(stage_timeout) for s in STAGES}


@contextlib.contextmanager
def without_main():
    """Start processes without re-importing the parent's `__main__` in them: the child's entry point lives in
    this package, and the main script may be `<stdin>`, `-c`, or a script with work at its top level."""
    main = sys.modules.get("__main__")
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if main is not None and k in main.__dict__}
    try:
        for k in saved:
            setattr(main, k, None) if k == "__spec__" else delattr(main, k)
        yield
    finally:
        for k, v in saved.items():
            setattr(main, k, v)


class Child:
    """One child process running `_child_main(job)`; `wait()` enforces the per-stage deadlines."""

    def __init__(self, job: dict, limits: dict):
        ctx = context()
        self.conn, child_conn = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_child_main, args=(json.dumps(job), child_conn), daemon=True)
        with without_main():
            self.proc.start()
        child_conn.close()
        self.limits = limits
        self.stage, self.entered = "build", time.monotonic()
        self.seconds: dict = {}

    def enter(self, stage: str):
        now = time.monotonic()
        self.seconds[self.stage] = round(now - self.entered, 3)
        self.stage, self.entered = stage, now

    def wait(self) -> dict:
        """The child's next result message, or {"outcome": "timeout" | "crashed", ...}."""
        while True:
            left = self.entered + self.limits[self.stage] - time.monotonic()
            if left <= 0 or not self.conn.poll(left):
                if self.conn.poll(0):
                    pass  # a message raced the deadline: take it
                else:
                    self.kill()
                    return {"outcome": "timeout", "message": f"the {self.stage} stage ran over its "
                            f"{self.limits[self.stage]:g} s limit; the candidate's process was killed"}
            try:
                msg = json.loads(self.conn.recv_bytes(1 << 24))
            except (EOFError, OSError, ValueError) as e:
                self.proc.join(5)
                code = self.proc.exitcode
                return {"outcome": "crashed", "message": f"the candidate's process died in the {self.stage} stage "
                        f"(exit code {code}{'' if code is None or code >= 0 else ', signal ' + str(-code)}; "
                        f"{type(e).__name__})"}
            if "stage" in msg:
                self.enter(msg["stage"])
                continue
            return msg

    def send(self, msg: dict):
        self.conn.send_bytes(json.dumps(msg).encode())

    def kill(self):
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)

    def close(self):
        try:
            self.send({"exit": True})
        except (OSError, ValueError):
            pass
        self.proc.join(5)
        self.kill()
        self.conn.close()
        self.seconds[self.stage] = round(time.monotonic() - self.entered, 3)


# ---------------------------------------------------------------------------------------------- the child side
def _child_main(job_json: str, conn):
    job = json.loads(job_json)

    def send(**msg):
        conn.send_bytes(json.dumps(msg, default=str).encode())

    try:
        _child_work(job, send, conn)
    except BaseException as e:  # the candidate's own exceptions included: reported, never silent
        tb = traceback.extract_tb(e.__traceback__)
        where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
        try:
            send(outcome="crashed", message=f"{type(e).__name__}: {e}{where}")
        except (OSError, ValueError):
            pass


def _child_work(job: dict, send, conn):
    from . import gates
    from .candidate import CandidateError, load_candidate
    from .evaluate import _storages, clone_all, draw_trial, run_forward, trial_facts, trial_plan
    from .problem import load_problem

    send(stage="build")
    problem = load_problem(job["problem"], cpu=job["cpu"], cpu_scale=job["cpu_scale"], signature=job["signature"])
    try:
        cand = load_candidate(job["source"], Path(job["work_dir"]))
    except CandidateError as e:
        return send(outcome="import-error", message=str(e))
    ks = cand.kernels()
    if not ks:
        return send(outcome="rejected", message="the module defines no @tp.kernel")
    target = job["target"]
    outcome, message = gates.build_check(ks, job["source"], target, can_compile=job["gpu"] and target != "cpu")
    if outcome:
        return send(outcome=outcome, message=message)
    if "verify" not in job["stages"]:
        return send(outcome="built")
    send(stage="verify")
    verdict = gates.verify_cached(ks, target, Path(job["work_dir"]) / "verdicts", cand.digest)
    cex = [f["counterexample"] | {"check": f["check"], "at": f["span"]} for f in verdict.findings
           if f["severity"] == "error"]
    if not verdict.ok:
        msgs = "; ".join(f"{f['kernel']}: {f['message']}" for f in verdict.findings if f["severity"] == "error")
        return send(outcome="verify-failed", message=msgs[:1500], verdict=verdict.to_dict(), counterexamples=cex)
    if "test" not in job["stages"]:
        return send(outcome="verified", verdict=verdict.to_dict())
    send(stage="test")
    device = job["device"]
    plan = trial_plan(problem, job["n_shapes"], job["seed"], job["trial_seed"])
    try:
        new = problem.make_model(job["seed"], cls=cand.model_class(problem)).to(device)
    except Exception as e:
        return send(outcome="test-failed", verdict=verdict.to_dict(),
                    message=f"constructing ModelNew(*get_init_inputs()) failed: {type(e).__name__}: {e}")
    files = {str(cand.path.resolve()), str(cand.path)}
    outputs, runs, prev = [], [], set()   # the outputs stay alive: no later output can reuse their storage
    for i, (shape, gen_seed) in enumerate(plan):
        inputs = draw_trial(problem, shape, gen_seed, device)     # the parent draws the same values
        keep = clone_all(inputs)
        run = run_forward(new, inputs, files)
        out = run.output if isinstance(run.output, torch.Tensor) else None
        runs.append({"launches": run.launches, "forbidden": run.forbidden, "error": run.error,
                     "facts": trial_facts(out, inputs, keep, prev), "output_type": type(run.output).__name__})
        del inputs, keep
        outputs.append(out)
        if out is not None:
            prev |= _storages([out])
            torch.save(out, f"{job['outputs']}.{i}")
        if run.error:
            break
    if device != "cpu":
        torch.cuda.synchronize()
    torch.save(dict(new.state_dict()), f"{job['outputs']}.state")
    send(outcome="tested", verdict=verdict.to_dict(), runs=runs)
    # The parent judges; only a correct candidate is timed.
    order = json.loads(conn.recv_bytes(1 << 20))
    if not order.get("time"):
        return None
    send(stage="time")
    from .evaluate import _time_graph, timing_sets

    ms, graph = [], []
    del outputs
    for shape, gen_seed in plan[:order["shapes"]]:
        inputs = draw_trial(problem, shape, gen_seed, device)
        more = timing_sets(problem, shape, gen_seed, device, inputs)  # the parent rotates the reference the same
        ms.append(time_forward(new, inputs, job["warmup"], job["runs"], more))
        graph.append(_time_graph(new, inputs, job["warmup"], job["runs"], more))  # (ms or None, why not)
        del inputs, more
    return send(outcome="timed", new_ms=ms, new_graph=graph)


def time_forward(model, inputs, warmup: int, runs: int, rotate=()) -> float:
    """Milliseconds per call: the larger of the device-event time (evaluate._time) and the wall clock over the
    same calls ended by a device-wide synchronize, so work hidden on another stream or deferred still counts.
    `rotate`: more input sets the calls take in turn (evaluate.timing_sets)."""
    from .evaluate import _time

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    ms = _time(model, inputs, warmup, runs, rotate)
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) * 1e3 / max(1, warmup + runs)
    return max(ms, wall)


# ---------------------------------------------------------------------------------------------- the parent side
class Sandbox:
    """The parent's side for one problem: its reference (built once), the trial inputs, the judging."""

    def __init__(self, problem, problem_path, target: str, *, cpu: bool, cpu_scale: int, gpu: bool, gpu_why: str,
                 tol: float, seed: int, work_dir: Path, warmup: int, runs: int, limits: dict | None = None):
        self.problem, self.problem_path, self.target = problem, str(Path(problem_path).resolve()), target
        self.cpu, self.cpu_scale, self.gpu, self.gpu_why = cpu, cpu_scale, gpu, gpu_why
        self.tol, self.seed, self.work_dir = tol, seed, Path(work_dir)
        self.warmup, self.runs = warmup, runs
        self.limits = limits_from(limits)
        self.device = "cuda" if gpu else "cpu"
        self.signature = problem.signature()   # the child skips get_inputs() at full size
        self.ref = problem.make_model(seed).to(self.device)
        self.ref_state = {k: v.detach().clone() for k, v in self.ref.state_dict().items()}
        self.ref_ms: dict = {}   # shape text -> ms: the reference does not change between candidates
        self.ref_graph_ms: dict = {}  # the same, per CUDA-graph replay

    def job(self, source: str, stages, outputs: str = "", trial_seed: int = 0) -> dict:
        return {"problem": self.problem_path, "cpu": self.cpu, "cpu_scale": self.cpu_scale, "source": source,
                "work_dir": str(self.work_dir), "target": self.target, "gpu": self.gpu, "device": self.device,
                "seed": self.seed, "stages": list(stages), "outputs": outputs, "trial_seed": trial_seed,
                "n_shapes": N_SHAPES, "warmup": self.warmup, "runs": self.runs, "signature": self.signature}

    def check(self, source: str, *, trial_seed: int = 0, time_it: bool = True,
              stages=("build", "verify", "test")) -> SandboxResult:
        from .policy import check_source

        why = check_source(source, "candidate.py")
        if why:
            return SandboxResult("forbidden", why)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        if "test" not in stages:
            child = Child(self.job(source, stages), self.limits)
            try:
                msg = child.wait()
            finally:
                child.close()
            return SandboxResult(msg.get("outcome", "crashed"), msg.get("message", ""), msg.get("verdict", {}),
                                 msg.get("counterexamples", []), None, child.seconds)
        with tempfile.TemporaryDirectory(prefix="argus-trial-", dir=self.work_dir) as tmp:
            return self._check_tested(source, trial_seed, time_it, Path(tmp))

    def _check_tested(self, source, trial_seed, time_it, tmp: Path) -> SandboxResult:
        from .evaluate import (
            ForwardRun,
            Trial,
            _max_err,
            _shape_text,
            check_parameters,
            clone_all,
            draw_trial,
            finish,
            float64_reference,
            judge_facts,
            trial_plan,
        )

        plan = trial_plan(self.problem, N_SHAPES, self.seed, trial_seed)
        out_path = str(tmp / "out")
        child = Child(self.job(source, ("build", "verify", "test"), out_path, trial_seed), self.limits)
        try:
            msg = child.wait()
            if msg.get("outcome") != "tested":
                return SandboxResult(msg.get("outcome", "crashed"), msg.get("message", ""), msg.get("verdict", {}),
                                     msg.get("counterexamples", []), None, child.seconds)
            verdict = msg.get("verdict", {})
            msg_params = check_parameters(self.ref_state, self._load(f"{out_path}.state"))
            if msg_params:
                return self._failed(msg_params, verdict, [], 0, child)
            trials, launches = [], 0
            runs = msg["runs"]
            for i, (sh, gen_seed) in enumerate(plan):
                inputs = draw_trial(self.problem, sh, gen_seed, self.device)   # the child drew the same values
                with torch.no_grad(), matching_reference():   # --precision: the reference at that precision
                    expected = self.ref(*clone_all(inputs))
                r = runs[i] if i < len(runs) else {"launches": 0, "forbidden": [], "error": "no result came back"}
                out = self._load(f"{out_path}.{i}") if Path(f"{out_path}.{i}").exists() else None
                if out is None and not r["error"]:
                    r["error"] = f"ModelNew.forward returned {r.get('output_type')}, not a tensor"
                run = ForwardRun(out, int(r["launches"]), list(r["forbidden"]), r["error"])
                launches += run.launches
                why = judge_facts(run, expected, r.get("facts") or {}, self.tol, self.problem,
                                  exact=lambda inputs=inputs: float64_reference(self.ref, inputs))
                if why:
                    trials.append(Trial(_shape_text(sh), False, _max_err(out, expected), why))
                    return self._failed(why, verdict, trials, launches, child)
                trials.append(Trial(_shape_text(sh), True, _max_err(out, expected)))
                del inputs, expected, out
            n_shapes = len(plan) - 1
            timed = self.gpu and time_it
            child.send({"time": timed, "shapes": n_shapes})
            if timed:
                msg = child.wait()
                if msg.get("outcome") != "timed":
                    return SandboxResult(msg.get("outcome", "crashed"), msg.get("message", ""), verdict, [],
                                         None, child.seconds)
                child.close()
                graphs = msg.get("new_graph") or [(None, "")] * len(msg["new_ms"])
                for t, (sh, gen_seed), new_ms, (graph_ms, note) in zip(trials, plan, msg["new_ms"], graphs):
                    t.new_ms = new_ms
                    t.ref_ms = self.reference_ms(sh, gen_seed)
                    t.new_graph_ms, t.graph_note = graph_ms, note
                    t.ref_graph_ms = self.reference_graph_ms(sh, gen_seed)
            ev = finish(trials, launches, len(plan), n_shapes, timed, self.gpu_why, self.warmup, self.runs)
            return SandboxResult("correct", ev.message, verdict, [], ev, child.seconds)
        finally:
            child.close()

    def _load(self, path: str):
        """A tensor file the child wrote (`weights_only`: nothing in it runs here)."""
        return torch.load(path, weights_only=True, map_location=self.device)

    def reference_ms(self, shape, gen_seed: int) -> float:
        from .evaluate import _shape_text, draw_trial, timing_sets

        key = _shape_text(shape)
        if key not in self.ref_ms:
            inputs = draw_trial(self.problem, shape, gen_seed, self.device)
            more = timing_sets(self.problem, shape, gen_seed, self.device, inputs)  # as the child rotates
            with matching_reference():
                self.ref_ms[key] = time_forward(self.ref, inputs, self.warmup, self.runs, more)
        return self.ref_ms[key]

    def reference_graph_ms(self, shape, gen_seed: int) -> float | None:
        """The reference's forward per CUDA-graph replay (None where torch's ops cannot be captured)."""
        from .evaluate import _shape_text, _time_graph, draw_trial, timing_sets

        key = _shape_text(shape)
        if key not in self.ref_graph_ms:
            inputs = draw_trial(self.problem, shape, gen_seed, self.device)
            more = timing_sets(self.problem, shape, gen_seed, self.device, inputs)
            self.ref_graph_ms[key] = _time_graph(self.ref, inputs, self.warmup, self.runs, more)[0]
        return self.ref_graph_ms[key]

    @staticmethod
    def _failed(why, verdict, trials, launches, child) -> SandboxResult:
        from .evaluate import Evaluation

        return SandboxResult("test-failed", why, verdict, [], Evaluation(False, why, trials, launches=launches),
                             child.seconds)
