"""Two-stage tuner.

Stage 1 turns a candidate module into a `Template`: its kernels' constexpr parameters (and literal thread
counts) with value sets become the search space; constexprs the host fixes at launch (`BLOCK_N=...`) are left
out. Each point is checked against the target before anything runs: the IR must build (instruction shapes,
tile divisibility) and threads, shared memory and estimated registers must fit; on a GPU the compiled kernel's
resources are checked too. Stage 2 evaluates the feasible points: correctness within tolerance on the test
shapes and the geometric-mean speedup (20 warm-up and 100 timed runs per shape by default). Small spaces are
searched exhaustively; larger ones with optuna's seeded TPE sampler.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import libcst as cst
import libcst.matchers as m

from . import gates
from .codemods import NotApplicable, SetConstexpr, SetThreads, constexpr_params, kernels, threads_literal

VALUES = {
    "BLOCK": ["256", "512", "1024", "2048", "4096"],
    "BLOCK_N": ["64", "128", "256", "512", "1024"],
    "BM": ["32", "64", "128"], "BN": ["32", "64", "128"], "BK": ["16", "32", "64"],
    "STAGES": ["2", "3", "4"],
    "WARPS": ["(1, 1)", "(2, 1)", "(1, 2)", "(2, 2)"],
    "GRID_CAP": ["132", "264", "528"],
}
THREADS = ["64", "128", "256"]
EXHAUSTIVE_LIMIT = 48


@dataclass
class Template:
    source: str
    params: dict          # "kernel.NAME" -> list of value sources (first = current)
    fixed: list = field(default_factory=list)  # constexprs the host sets at launch

    def size(self) -> int:
        n = 1
        for v in self.params.values():
            n *= len(v)
        return n

    def points(self):
        keys = list(self.params)
        for combo in itertools.product(*(self.params[k] for k in keys)):
            yield dict(zip(keys, combo))

    def render(self, point: dict) -> str:
        src = self.source
        for key, value in point.items():
            kernel, name = key.split(".", 1)
            try:
                if name == "threads":
                    src = SetThreads().apply(src, threads=int(value), kernel=kernel)
                else:
                    src = SetConstexpr().apply(src, name=name, value=value, kernel=kernel)
            except NotApplicable:
                pass  # already that value
        return src


def make_template(source: str) -> Template:
    module = cst.parse_module(source)
    fixed = _host_fixed(module)
    params = {}
    for fn in kernels(module):
        k = fn.name.value
        for name, default in constexpr_params(fn).items():
            if name in VALUES and (k, name) not in fixed:
                vals = [default] + [v for v in VALUES[name] if v != default]
                params[f"{k}.{name}"] = vals
        threads = threads_literal(fn)
        if threads is not None:
            params[f"{k}.threads"] = [str(threads)] + [t for t in THREADS if t != str(threads)]
    return Template(source, params, sorted(f"{k}.{n}" for k, n in fixed))




def _host_fixed(module) -> set:
    fixed = set()

    class V(cst.CSTVisitor):
        def visit_Call(self, node):
            if m.matches(node.func, m.Name("launch")) and node.args and isinstance(node.args[0].value, cst.Name):
                for a in node.args:
                    if a.keyword is not None:
                        fixed.add((node.args[0].value.value, a.keyword.value))

    module.visit(V())
    return fixed


def feasibility(source: str, target: str, directory) -> str:
    """'' when every kernel of `source` builds and fits `target`, else why not (stage 1)."""
    from .candidate import CandidateError, load_candidate

    try:
        cand = load_candidate(source, directory)
    except CandidateError as e:
        return str(e)
    return gates.build_check(cand.kernels(), source, target, can_compile=target != "cpu")[1]


@dataclass
class TuneResult:
    best_source: str
    best_point: dict
    best_speedup: float | None
    rows: list                 # dicts: point, feasible, correct, speedup, note
    method: str
    timing: str

    def to_dict(self) -> dict:
        return {"best_point": self.best_point, "best_speedup": self.best_speedup, "rows": self.rows,
                "method": self.method, "timing": self.timing}


BATCH = 8   # points whose stage 1 runs at once (`feasible_many`) before their evaluations, one by one


def tune(source: str, evaluate_source, target: str, directory, max_evals: int = 16, seed: int = 0,
         progress=None, feasible=None, feasible_many=None) -> TuneResult:
    """Search the template of `source`. `evaluate_source(src) -> Evaluation` runs stage 2 for one point;
    `feasible(src, target, directory) -> why not` stage 1 (default `feasibility`, in this process);
    `feasible_many([src]) -> [why not]`, when given, runs stage 1 of a batch of points at once (in parallel
    processes): evaluations, which own the GPU, stay one at a time."""
    tpl = make_template(source)
    rows = []
    current = {k: v[0] for k, v in tpl.params.items()}
    known: dict = {}   # rendered source -> stage 1's answer

    def stage1(points):
        srcs = [tpl.render(p) for p in points]
        todo = list(dict.fromkeys(s for s in srcs if s not in known))
        if feasible_many is not None and len(todo) > 1:
            known.update(zip(todo, feasible_many(todo)))

    def run_point(point):
        src = tpl.render(point)
        if src not in known:
            known[src] = (feasible or feasibility)(src, target, directory)
        why = known[src]
        if why:
            rows.append({"point": point, "feasible": False, "correct": False, "speedup": None, "note": why})
            return None
        ev = evaluate_source(src)
        rows.append({"point": point, "feasible": True, "correct": ev.correct, "speedup": ev.speedup,
                     "note": "" if ev.correct else ev.message[:200]})
        if progress:
            progress()
        return ev

    if tpl.size() <= min(EXHAUSTIVE_LIMIT, max_evals):
        method = f"exhaustive ({tpl.size()} points)"
        points = list(tpl.points())
        stage1(points)
        evals = [(p, run_point(p)) for p in points]
    else:
        method = f"optuna TPE ({max_evals} of {tpl.size()} points, seed {seed}, batches of {BATCH})"
        evals = _optuna(tpl, run_point, max_evals, seed, current, stage1)
    timing = next((ev.timing for _, ev in evals if ev is not None), "no feasible point")
    scored = [(p, ev) for p, ev in evals if ev is not None and ev.correct]
    timed = [(p, ev) for p, ev in scored if ev.speedup]
    if timed:
        best_point, best_ev = max(timed, key=lambda t: t[1].speedup)
        return TuneResult(tpl.render(best_point), best_point, best_ev.speedup, rows, method, timing)
    # Without timings no point can be preferred to the current one: keep it (if it is correct).
    return TuneResult(source, current, None, rows, method, timing)


def _optuna(tpl: Template, run_point, n_trials: int, seed: int, current: dict, stage1=None):
    """TPE asked for a batch of points at a time (stage 1 of the batch at once, then each evaluated and told)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(seed=seed)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.enqueue_trial(current)
    evals = []
    while len(evals) < n_trials:
        batch = []
        for _ in range(min(BATCH, n_trials - len(evals))):
            trial = study.ask()
            batch.append((trial, {k: trial.suggest_categorical(k, v) for k, v in tpl.params.items()}))
        if stage1 is not None:
            stage1([p for _, p in batch])
        for trial, point in batch:
            ev = run_point(point)
            evals.append((point, ev))
            study.tell(trial, -1.0 if ev is None or not ev.correct else (ev.speedup if ev.speedup else 0.0))
    return evals
