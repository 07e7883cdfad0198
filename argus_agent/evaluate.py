"""Evaluation that cannot be gamed: a `ModelNew` against the reference `Model`, in the same process.

Every trial draws fresh random inputs; tensors that ModelNew allocates with `torch.empty*` are poisoned
(NaN) so an output the kernels did not write shows; the reference runs on its own copy of the inputs; and a
guard (a TorchFunctionMode) watches ModelNew.forward: it must launch at least one tilepy kernel, may use torch
only to allocate, reshape, cast and move data (any arithmetic outside a kernel is a fallback to torch and is
rejected, naming the op), must not return (a view of) an input, must not write its inputs, and must give the
right answer on the base shape drawn twice (output caching fails the second draw).
"""

from __future__ import annotations

import contextlib
import math
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


class GameError(Exception):
    """ModelNew tried something the evaluation forbids (the message says what)."""


def _func_name(func) -> str:
    name = getattr(func, "__name__", None) or str(func)
    if name == "__get__":
        return "__get__"
    return name


class Guard(TorchFunctionMode):
    """Watches torch calls made by the host program (not by kernels) and counts tilepy kernel launches."""

    def __init__(self, poison: bool = True):
        super().__init__()
        self.poison = poison
        self.in_launch = 0
        self.launches = 0
        self.forbidden: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.in_launch:
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
        guard = self

        def wrap(fn):
            def counted(*a, **k):
                guard.launches += 1
                guard.in_launch += 1
                try:
                    return fn(*a, **k)
                finally:
                    guard.in_launch -= 1
            return counted

        for obj, attr, fn in originals:
            setattr(obj, attr, wrap(fn))
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


@dataclass
class Evaluation:
    correct: bool
    message: str
    trials: list = field(default_factory=list)
    speedup: float | None = None   # geometric mean over the test shapes (None when not timed)
    timing: str = ""               # "timed (20 warm-up, 100 runs)" or "skipped: <why>"
    launches: int = 0

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


def _storages(xs) -> set:
    return {x.untyped_storage().data_ptr() for x in xs if isinstance(x, torch.Tensor) and x.numel()}


def evaluate(problem, model_new_cls, *, tol: float = 1e-2, seed: int = 0, n_shapes: int = 3, time_it: bool = True,
             warmup: int = 20, runs: int = 100, trial_seed: int = 0) -> Evaluation:
    """Check `model_new_cls` against the problem's Model on fresh inputs per trial; time on a GPU."""
    can_time, why = gpu_status()
    device = "cuda" if can_time else "cpu"
    ref = problem.make_model(seed).to(device)
    try:
        new = problem.make_model(seed, cls=model_new_cls).to(device)
    except Exception as e:
        return Evaluation(False, f"constructing ModelNew(*get_init_inputs()) failed: {type(e).__name__}: {e}")
    ref_state, new_state = ref.state_dict(), new.state_dict()
    for k, v in ref_state.items():
        if k not in new_state or new_state[k].shape != v.shape or not torch.equal(new_state[k], v):
            return Evaluation(False, f"ModelNew's parameter `{k}` differs from Model's under the same seed: build "
                              "them in the same order as Model.__init__ does")
    shapes = problem.shapes(n_shapes)
    plan = shapes + [shapes[0]]  # the base shape drawn again: outputs cached across calls fail here
    trials, launches = [], 0
    gen = torch.Generator().manual_seed(1_000_003 * (trial_seed + 1) + seed)
    prev_out_storage: set = set()
    for i, sh in enumerate(plan):
        inputs = problem.draw_inputs(sh, gen, device)
        ref_in = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        keep = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        with torch.no_grad():
            expected = ref(*ref_in)
        guard = Guard()
        try:
            with torch.no_grad(), guard.watching_launches(), guard:
                out = new(*inputs)
        except Exception as e:
            trials.append(Trial(_shape_text(sh), False, message=f"ModelNew.forward raised {type(e).__name__}: {e}"))
            return Evaluation(False, trials[-1].message, trials, launches=launches)
        launches += guard.launches
        problem_msg = _judge(guard, out, expected, inputs, keep, tol, prev_out_storage, problem)
        if problem_msg:
            err = _max_err(out, expected)
            trials.append(Trial(_shape_text(sh), False, err, problem_msg))
            return Evaluation(False, problem_msg, trials, launches=launches)
        prev_out_storage = _storages([out])
        trial = Trial(_shape_text(sh), True, _max_err(out, expected))
        if can_time and time_it and i < len(shapes):
            trial.ref_ms = _time(ref, inputs, warmup, runs)
            trial.new_ms = _time(new, inputs, warmup, runs)
        trials.append(trial)
    if can_time and time_it:
        sp = [t.ref_ms / t.new_ms for t in trials if t.new_ms]
        speedup = math.exp(sum(math.log(s) for s in sp) / len(sp)) if sp else None
        timing = f"timed on {torch.cuda.get_device_name()} ({warmup} warm-up, {runs} timed runs per shape)"
    else:
        speedup, timing = None, "skipped: " + (why or "timing not requested")
    return Evaluation(True, f"correct on {len(plan)} trials ({len(shapes)} shapes, fresh inputs each)", trials,
                      speedup, timing, launches)


def _judge(guard, out, expected, inputs, keep, tol, prev_out_storage, problem) -> str:
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
    if _storages([out]) & _storages(inputs):
        return "ModelNew.forward returned one of its inputs (or a view of one)"
    if _storages([out]) & prev_out_storage:
        return "ModelNew.forward returned the same storage as on the previous call (cached output)"
    for x, k in zip(inputs, keep):
        if isinstance(x, torch.Tensor) and not torch.equal(x, k) and not (x.isnan() & k.isnan()).all():
            return "ModelNew.forward modified its inputs"
    if out.shape != expected.shape:
        return f"output shape {tuple(out.shape)} differs from the reference's {tuple(expected.shape)}"
    if not torch.allclose(out.float(), expected.float(), atol=tol, rtol=tol):
        bad = (~torch.isclose(out.float(), expected.float(), atol=tol, rtol=tol)).nonzero()
        first = tuple(int(i) for i in bad[0]) if len(bad) else ()
        return (f"wrong result: {len(bad)} of {out.numel()} elements differ beyond atol=rtol={tol:g}; first at "
                f"{first}: got {out[first].item():.6g}, expected {expected[first].item():.6g}")
    return ""


def _reference_ops(problem) -> list[str]:
    return [op.split(".")[-1].lower() for op in getattr(problem, "ops", [])]


def _max_err(out, expected) -> float | None:
    try:
        d = (out.float() - expected.float()).abs()
        return float(d.max()) if d.numel() else 0.0
    except Exception:
        return None


def _time(model, inputs, warmup: int, runs: int) -> float:
    with torch.no_grad():
        for _ in range(warmup):
            model(*inputs)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(runs):
            model(*inputs)
        end.record()
        torch.cuda.synchronize()
    return start.elapsed_time(end) / runs
