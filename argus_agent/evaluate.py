"""Evaluation that cannot be gamed: a `ModelNew` against the reference `Model`.

In the optimize loop every candidate runs in a child process (`sandbox.py`); this module holds the parts
both sides share. Parent and child draw the same fresh random inputs per trial (a seed per trial, drawn on the
device) and the parent computes the reference itself; the child runs ModelNew.forward under a guard and hands
back its outputs with the facts about its inputs it alone can see (`trial_facts`); the parent judges them with
its own torch (`judge_facts`). Tensors ModelNew allocates with `torch.empty*` are
poisoned (NaN) so an output the kernels did not write shows. The guard (a TorchFunctionMode) watches the host
program: it must launch at least one tilepy kernel, may use torch only to allocate, reshape, cast and move
data (any arithmetic outside a kernel is a fallback to torch and is rejected, naming the op; code of the
candidate that runs inside a launch, like a `threads=` callable, is held to the same rule), must not return (a
view of) an input, must not write its inputs, and must give the right answer on the base shape drawn twice
(output caching fails the second draw). `evaluate()` runs both sides in one process, for trusted code.
"""

from __future__ import annotations

import contextlib
import math
import sys
from dataclasses import asdict, dataclass, field

import torch
from torch.overrides import TorchFunctionMode

# Torch calls a host program may make outside kernels: allocation, views, casts, metadata, device moves.
ALLOWED = frozenset("""
contiguous view view_as reshape flatten t transpose permute unsqueeze squeeze expand size dim numel stride
is_contiguous data_ptr to float bfloat16 half detach __get__ __len__ new_empty empty empty_like empty_strided
zeros zeros_like new_zeros full full_like cpu cuda requires_grad_ element_size storage_offset is_floating_point
get_device type __format__ __repr__ __hash__ dtype device shape untyped_storage __index__ __int__ item
""".split())
POISON = frozenset({"empty", "empty_like", "new_empty", "empty_strided"})


def _func_name(func) -> str:
    name = getattr(func, "__name__", None) or str(func)
    if name == "__get__":
        return "__get__"
    return name


def _counted(guard, fn):
    def counted(*a, **k):
        guard.launches += 1
        guard.in_launch += 1
        try:
            return fn(*a, **k)
        finally:
            guard.in_launch -= 1
    return counted


_LAUNCH_CODE = _counted(None, None).__code__


class Guard(TorchFunctionMode):
    """Watches torch calls made by the host program (not by kernels) and counts tilepy kernel launches.

    A torch call is the host program's when, walking out from it, a frame of a candidate file (`candidate_files`)
    comes before a launch: so code of the candidate that tilepy calls back during a launch is watched too."""

    def __init__(self, poison: bool = True, candidate_files=()):
        super().__init__()
        self.poison = poison
        self.candidate_files = frozenset(candidate_files)
        self.in_launch = 0
        self.launches = 0
        self.forbidden: list[str] = []

    def _inside_launch(self) -> bool:
        if not self.in_launch:
            return False
        f = sys._getframe(2)
        while f is not None:
            if f.f_code is _LAUNCH_CODE:
                return True
            if f.f_code.co_filename in self.candidate_files:
                return False
            f = f.f_back
        return True

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self._inside_launch():
            return out
        name = _func_name(func)
        if name not in ALLOWED:
            self.forbidden.append(name)
        elif self.poison and name in POISON and isinstance(out, torch.Tensor):
            if out.dtype.is_floating_point:
                out.fill_(float("nan"))
            elif out.dtype != torch.bool:
                out.fill_(torch.iinfo(out.dtype).max)
        return out

    @contextlib.contextmanager
    def watching_launches(self):
        """Patch the two ways to launch a tilepy kernel so launches are counted and their insides ignored."""
        import importlib

        tk = importlib.import_module("tilepy.kernel")  # `tilepy.kernel` the attribute is the decorator

        patched = [(tk.Kernel, "run")]
        try:
            import tilepy_hip

            if hasattr(tilepy_hip, "launch"):
                patched.append((tilepy_hip, "launch"))
        except ImportError:
            pass
        originals = [(obj, attr, getattr(obj, attr)) for obj, attr in patched]
        for obj, attr, fn in originals:
            setattr(obj, attr, _counted(self, fn))
        try:
            yield self
        finally:
            for obj, attr, fn in originals:
                setattr(obj, attr, fn)


@dataclass
class Trial:
    shape: str
    ok: bool
    max_abs_err: float | None = None
    message: str = ""
    ref_ms: float | None = None
    new_ms: float | None = None
    ref_graph_ms: float | None = None  # the forward captured once in a CUDA graph, per replay
    new_graph_ms: float | None = None
    graph_note: str = ""               # why ModelNew has no graph figure (its capture failed, or it is not static)


@dataclass
class Evaluation:
    correct: bool
    message: str
    trials: list = field(default_factory=list)
    speedup: float | None = None   # geometric mean over the test shapes (None when not timed)
    timing: str = ""               # "timed (20 warm-up, 100 runs)" or "skipped: <why>"
    launches: int = 0
    graph_speedup: float | None = None  # the same from CUDA-graph replays of both forwards (None: not captured)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["trials"] = [asdict(t) if not isinstance(t, dict) else t for t in self.trials]
        return d


def gpu_status() -> tuple[bool, str]:
    """(can time on a GPU, why not)."""
    if not torch.cuda.is_available():
        return False, "no CUDA GPU (torch.cuda.is_available() is False): correctness ran on the tilepy CPU " \
                      "interpreter, whose speed says nothing about a GPU"
    try:
        import tilepy_hip

        if not hasattr(tilepy_hip, "launch"):
            return False, "tilepy_hip has no `launch` yet: kernels cannot be compiled for the GPU"
    except ImportError as e:
        return False, f"tilepy_hip is not importable ({e}): kernels cannot be compiled for the GPU"
    return True, ""


def _shape_text(shapes) -> str:
    return " ".join("x".join(map(str, s)) if k == "tensor" else repr(s) for k, s, _ in shapes)


# Bound when this module is imported (the sandbox's fork server imports it before any candidate): a candidate
# that rebinds torch.equal or a Tensor method in its child changes none of the facts the child reports.
_EQUAL, _ISNAN, _AND, _ALL, _NUMEL = torch.equal, torch.isnan, torch.logical_and, torch.all, torch.numel
_STORAGE, _DATA_PTR = torch.Tensor.untyped_storage, torch.UntypedStorage.data_ptr


def _storages(xs) -> set:
    return {_DATA_PTR(_STORAGE(x)) for x in xs if isinstance(x, torch.Tensor) and _NUMEL(x)}


def trial_plan(problem, n_shapes: int = 3, seed: int = 0, trial_seed: int = 0) -> list[tuple[list, int]]:
    """[(shape signature, generator seed)] for one evaluation: the test shapes, then the base shape drawn again
    (outputs cached across calls fail there). Inputs are fresh per evaluation (`trial_seed`). Each trial has a
    seed of its own, so a process draws any trial's inputs alone (`draw_trial`): the sandbox's parent and child
    each draw the same inputs on the device, and nothing of them goes through a file."""
    shapes = problem.shapes(n_shapes)
    base = 1_000_003 * (trial_seed + 1) + seed
    return [(sh, base + 7_919 * i) for i, sh in enumerate(shapes + [shapes[0]])]


def draw_trial(problem, shape, gen_seed: int, device: str) -> list:
    """The inputs of one trial of `trial_plan`, drawn on `device` (the same values in every process)."""
    return problem.draw_inputs(shape, torch.Generator(device=device).manual_seed(gen_seed), device)


def plan_trials(problem, n_shapes: int = 3, seed: int = 0, trial_seed: int = 0, device: str = "cpu"):
    """[(shape signature, inputs on `device`)] of `trial_plan`, all drawn."""
    return [(sh, draw_trial(problem, sh, g, device)) for sh, g in trial_plan(problem, n_shapes, seed, trial_seed)]


def trial_facts(out, inputs_after, keep, prev_out_storage: set) -> dict:
    """What judging needs of the tensors only the process that ran ModelNew.forward holds: whether the output
    is (a view of) an input or the storage of an earlier call's output, and whether the inputs were written."""
    outs = _storages([out]) if isinstance(out, torch.Tensor) else set()
    return {"aliases_input": bool(outs & _storages(inputs_after)),
            "aliases_previous": bool(outs & prev_out_storage),
            "modified_input": any(isinstance(x, torch.Tensor) and not _EQUAL(x, k)
                                  and not bool(_ALL(_AND(_ISNAN(x), _ISNAN(k)))) for x, k in zip(inputs_after, keep))}


def to_device(xs, device):
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in xs]


def clone_all(xs):
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]


@dataclass
class ForwardRun:
    """What one guarded ModelNew.forward call gave: the output (or the error) and what the guard saw."""

    output: object = None
    launches: int = 0
    forbidden: list = field(default_factory=list)
    error: str = ""


def run_forward(new, inputs, candidate_files=()) -> ForwardRun:
    """Call `new(*inputs)` under the guard (this is what the sandbox's child does per trial)."""
    guard = Guard(candidate_files=candidate_files)
    try:
        with torch.no_grad(), guard.watching_launches(), guard:
            out = new(*inputs)
    except Exception as e:
        return ForwardRun(None, guard.launches, guard.forbidden, f"ModelNew.forward raised {type(e).__name__}: {e}")
    return ForwardRun(out, guard.launches, guard.forbidden)


def check_parameters(ref_state: dict, new_state: dict) -> str:
    for k, v in ref_state.items():
        n = new_state.get(k)
        if not isinstance(n, torch.Tensor) or n.shape != v.shape or not torch.equal(n.to(v.device), v):
            return (f"ModelNew's parameter `{k}` differs from Model's under the same seed: build them in the same "
                    "order as Model.__init__ does")
    return ""


def judge_trial(run: ForwardRun, expected, inputs_after, keep, tol, prev_out_storage, problem, exact=None) -> str:
    """'' when the trial passes, else why not, from the tensors themselves (one process holds them all).
    `exact()`, when given, is the reference computed in float64 (see `float64_reference`)."""
    if run.error:
        return run.error
    return judge_facts(run, expected, trial_facts(run.output, inputs_after, keep, prev_out_storage), tol, problem,
                       exact)


def judge_facts(run: ForwardRun, expected, facts: dict, tol, problem, exact=None) -> str:
    """`judge_trial` where the inputs stayed in the process that ran the forward: `facts` (`trial_facts`) came
    from there, and the output was handed back. The parent judges values against its own reference."""
    if run.error:
        return run.error
    return _judge(run, run.output, expected, facts, tol, problem, exact)


def float64_reference(model, inputs):
    """The reference's output computed in float64 (a float64 copy of the model on float64 copies of the floating
    inputs), or None where that cannot be had (the model fails in float64, or returns no floating tensor).

    It arbitrates where a candidate misses PyTorch's own low-precision result: the candidate passes when it
    matches the exact value at the same tolerance. The tolerance is not loosened; the oracle is the more
    accurate one (an fp32 cumsum over a long row, or a sum with cancellation, can be nearer the exact value than
    torch's fp32 is)."""
    import copy

    try:
        m64 = copy.deepcopy(model).double()
        xs = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
        with torch.no_grad():
            out = m64(*xs)
    except Exception:
        return None
    return out if isinstance(out, torch.Tensor) and out.is_floating_point() else None


def evaluate(problem, model_new_cls, *, tol: float = 1e-2, seed: int = 0, n_shapes: int = 3, time_it: bool = True,
             warmup: int = 20, runs: int = 100, trial_seed: int = 0) -> Evaluation:
    """Check `model_new_cls` against the problem's Model on fresh inputs per trial; time on a GPU. In process:
    for trusted code (a model_new.py the user holds); the optimize loop evaluates candidates in a sandbox."""
    from .lower.precision import matching_reference

    can_time, why = gpu_status()
    device = "cuda" if can_time else "cpu"
    ref = problem.make_model(seed).to(device)
    try:
        new = problem.make_model(seed, cls=model_new_cls).to(device)
    except Exception as e:
        return Evaluation(False, f"constructing ModelNew(*get_init_inputs()) failed: {type(e).__name__}: {e}")
    msg = check_parameters(ref.state_dict(), new.state_dict())
    if msg:
        return Evaluation(False, msg)
    plan = trial_plan(problem, n_shapes, seed, trial_seed)
    n_timed = len(plan) - 1
    trials, launches = [], 0
    prev_out_storage: set = set()
    for i, (sh, gen_seed) in enumerate(plan):
        inputs = draw_trial(problem, sh, gen_seed, device)
        keep = clone_all(inputs)
        with torch.no_grad(), matching_reference():   # --precision: the reference at that precision
            expected = ref(*clone_all(inputs))
        run = run_forward(new, inputs)
        launches += run.launches
        problem_msg = judge_trial(run, expected, inputs, keep, tol, prev_out_storage, problem,
                                  exact=lambda keep=keep: float64_reference(ref, keep))
        if problem_msg:
            trials.append(Trial(_shape_text(sh), False, _max_err(run.output, expected), problem_msg))
            return Evaluation(False, problem_msg, trials, launches=launches)
        prev_out_storage |= _storages([run.output])
        trial = Trial(_shape_text(sh), True, _max_err(run.output, expected))
        if can_time and time_it and i < n_timed:
            more = timing_sets(problem, sh, gen_seed, device, inputs)
            with matching_reference():
                trial.ref_ms = _time(ref, inputs, warmup, runs, more)
            trial.new_ms = _time(new, inputs, warmup, runs, more)
            trial.ref_graph_ms, _ = _time_graph(ref, inputs, warmup, runs, more)
            trial.new_graph_ms, trial.graph_note = _time_graph(new, inputs, warmup, runs, more)
            del more
        trials.append(trial)
    return finish(trials, launches, len(plan), n_timed, can_time and time_it, why, warmup, runs)


def finish(trials, launches, n_trials, n_shapes, timed, why, warmup, runs) -> Evaluation:
    """The Evaluation of trials that all passed."""
    graph_speedup = None
    if timed:
        sp = [t.ref_ms / t.new_ms for t in trials if t.new_ms]
        speedup = math.exp(sum(math.log(s) for s in sp) / len(sp)) if sp else None
        timing = f"timed on {torch.cuda.get_device_name()} ({warmup} warm-up, {runs} timed runs per shape)"
        gp = [t.ref_graph_ms / t.new_graph_ms for t in trials if t.new_graph_ms and t.ref_graph_ms]
        if gp and len(gp) == len(sp):
            graph_speedup = math.exp(sum(math.log(s) for s in gp) / len(gp))
            timing += f"; CUDA-graph replay {graph_speedup:.3f}x"
        else:
            notes = sorted({t.graph_note for t in trials if t.graph_note})
            timing += "; no CUDA-graph figure" + (f" ({notes[0]})" if notes else " (not measured on this path)")
    else:
        speedup, timing = None, "skipped: " + (why or "timing not requested")
    return Evaluation(True, f"correct on {n_trials} trials ({n_shapes} shapes, fresh inputs each)", trials,
                      speedup, timing, launches, graph_speedup)


def _judge(guard, out, expected, facts: dict, tol, problem, exact=None) -> str:
    if guard.launches == 0:
        return "ModelNew.forward launched no tilepy kernel: the work must be done by kernels"
    if guard.forbidden:
        ops = sorted(set(guard.forbidden))
        replaced = [o for o in ops if any(o in r for r in _reference_ops(problem))]
        what = f" (the reference's own op{'s' if len(replaced) > 1 else ''}: {', '.join(replaced)})" if replaced else ""
        return (f"ModelNew.forward computes with torch outside tilepy kernels: {', '.join(ops)}{what}; only "
                "allocation, views, casts and device moves are allowed there")
    if not isinstance(out, torch.Tensor):
        return f"ModelNew.forward returned {type(out).__name__}, not a tensor"
    if facts["aliases_input"]:
        return "ModelNew.forward returned one of its inputs (or a view of one)"
    if facts["aliases_previous"]:
        return "ModelNew.forward returned the same storage as on the previous call (cached output)"
    if facts["modified_input"]:
        return "ModelNew.forward modified its inputs"
    if out.shape != expected.shape:
        return f"output shape {tuple(out.shape)} differs from the reference's {tuple(expected.shape)}"
    if not torch.allclose(out.float(), expected.float(), atol=tol, rtol=tol):
        bad = (~torch.isclose(out.float(), expected.float(), atol=tol, rtol=tol)).nonzero()
        first = tuple(int(i) for i in bad[0]) if len(bad) else ()
        ex = exact() if exact is not None and expected.is_floating_point() else None
        if ex is not None and ex.shape == out.shape and torch.allclose(out.double(), ex, atol=tol, rtol=tol):
            return ""   # within tolerance of the exact (float64) value: more accurate than the reference itself
        arbiter = ""
        if ex is not None and ex.shape == out.shape:
            arbiter = f", float64 reference {ex[first].item():.6g} (missed as well)"
        return (f"wrong result: {len(bad)} of {out.numel()} elements differ beyond atol=rtol={tol:g}; first at "
                f"{first}: got {out[first].item():.6g}, expected {expected[first].item():.6g}{arbiter}")
    return ""


def _reference_ops(problem) -> list[str]:
    return [op.split(".")[-1].lower() for op in getattr(problem, "ops", [])]


def _max_err(out, expected) -> float | None:
    try:
        d = (out.float() - expected.float()).abs()
        return float(d.max()) if d.numel() else 0.0
    except Exception:
        return None


def _time_graph(model, inputs, warmup: int, runs: int, rotate=()) -> tuple[float | None, str]:
    """Milliseconds per replay of the forward captured once in a CUDA graph (a static host program launches the
    same kernels for the same shapes, so one capture per shape replays it with no host work), or (None, why).
    `rotate`: more input sets (`timing_sets`), one capture each, replayed in turn."""
    from tilepy_hip.graphs import replay_ms

    return replay_ms(model, list(inputs), warmup, runs, rotate=[list(x) for x in rotate])


def _time(model, inputs, warmup: int, runs: int, rotate=()) -> float:
    """Milliseconds per forward, device events around `runs` calls after `warmup`; the calls take `inputs` and
    the sets in `rotate` in turn."""
    sets = [inputs, *rotate]
    with torch.no_grad():
        for i in range(warmup):
            model(*sets[i % len(sets)])
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(runs):
            model(*sets[i % len(sets)])
        end.record()
        torch.cuda.synchronize()
    return start.elapsed_time(end) / runs


ROTATE_MAX_SETS = 16  # at most this many input sets per timed shape (inputs of a few KB stay in the L2 anyway)


def timing_sets(problem, shape, gen_seed: int, device: str, inputs) -> list:
    """The input sets a timed shape's calls rotate over besides `inputs`: drawn like the trial's (seeds after its
    own), as many as make the inputs' bytes at least twice the device's L2, so that neither the reference nor the
    candidate is timed on inputs left in the cache by the call before (the benchmarks' rule, benchmarks/timing.py).
    Empty on the CPU or where one set is already that large."""
    from tilepy_hip.graphs import rotation_count

    if device == "cpu" or not torch.cuda.is_available():
        return []
    size = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
    l2 = int(getattr(torch.cuda.get_device_properties(torch.device(device)), "L2_cache_size", 0) or 0)
    n = rotation_count(size, l2, ROTATE_MAX_SETS) - 1
    return [draw_trial(problem, shape, gen_seed + 104_729 * (j + 1), device) for j in range(n)]
