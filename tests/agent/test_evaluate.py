"""The evaluation cannot be gamed: fallbacks to torch, returned inputs, cached outputs, no launches, unwritten
outputs and modified inputs are all rejected."""

import torch

from argus_agent.candidate import load_candidate
from argus_agent.evaluate import evaluate
from argus_agent.loop import Session


def _session(examples, name="swish_add"):
    return Session(examples[name])


def _model_new(session, forward):
    class ModelNew(session.problem.module.Model):
        def forward(self, *xs):
            return forward(self, *xs)

    return ModelNew


def _real(session, tmp_path):
    return load_candidate(session.first_source(), tmp_path).module


def test_honest_candidate_passes(examples, tmp_path):
    s = _session(examples)
    ev = evaluate(s.problem, load_candidate(s.first_source(), tmp_path).model_class(s.problem), tol=s.tol)
    assert ev.correct and ev.launches >= 2 and ev.timing.startswith("skipped")   # a kernel per trial


def test_fallback_to_the_torch_op_is_rejected(examples, tmp_path):
    s = _session(examples)
    mod = _real(s, tmp_path)

    def forward(model, x, y):
        mod.argus_forward(model, x, y)          # launches a kernel for show...
        return x * torch.sigmoid(x) + y         # ...but returns torch's answer

    ev = evaluate(s.problem, _model_new(s, forward), tol=s.tol)
    assert not ev.correct and "outside tilepy kernels" in ev.message and "sigmoid" in ev.message


def test_no_kernel_launch_is_rejected(examples):
    s = _session(examples)
    ev = evaluate(s.problem, _model_new(s, lambda model, x, y: torch.empty_like(x)), tol=s.tol)
    assert not ev.correct and "launched no tilepy kernel" in ev.message


def test_returning_an_input_is_rejected(examples, tmp_path):
    s = _session(examples)
    mod = _real(s, tmp_path)

    def forward(model, x, y):
        mod.argus_forward(model, x, y)
        return y

    ev = evaluate(s.problem, _model_new(s, forward), tol=s.tol)
    assert not ev.correct and "returned one of its inputs" in ev.message


def test_cached_output_is_rejected(examples, tmp_path):
    s = _session(examples)
    mod = _real(s, tmp_path)
    cache = {}

    def forward(model, x, y):
        key = tuple(x.shape)
        if key not in cache:
            cache[key] = mod.argus_forward(model, x, y)
        else:
            mod.argus_forward(model, x, y)
        return cache[key]

    ev = evaluate(s.problem, _model_new(s, forward), tol=s.tol)
    assert not ev.correct and ("cached" in ev.message or "wrong result" in ev.message)


def test_unwritten_output_is_poisoned(examples, tmp_path):
    s = _session(examples)
    mod = _real(s, tmp_path)

    def forward(model, x, y):
        mod.argus_forward(model, x, y)
        return torch.empty_like(x)              # never written by a kernel: poisoned with NaN

    ev = evaluate(s.problem, _model_new(s, forward), tol=s.tol)
    assert not ev.correct and "got nan" in ev.message


def test_different_parameters_are_rejected(examples):
    s = _session(examples, "rms_norm")

    class ModelNew(s.problem.module.Model):
        def __init__(self, dim):
            super().__init__(dim)
            with torch.no_grad():
                self.norm.weight.add_(1.0)

    ev = evaluate(s.problem, ModelNew, tol=s.tol)
    assert not ev.correct and "differs from Model's" in ev.message


def test_each_trial_draws_fresh_inputs(examples, tmp_path):
    s = _session(examples)
    seen = []
    draw = s.problem.draw_inputs

    def recording_draw(*a, **k):
        inputs = draw(*a, **k)
        seen.append(inputs[0].clone())
        return inputs

    s.problem.draw_inputs = recording_draw
    cand = load_candidate(s.first_source(), tmp_path)
    assert evaluate(s.problem, cand.model_class(s.problem), tol=s.tol).correct
    # a lowered program is specialized to the base shape: the base shape, drawn afresh twice
    assert len(seen) == 2 and seen[0].shape == seen[1].shape and not torch.equal(seen[0], seen[1])


class _Cancel(torch.nn.Module):
    """(x + 1e8) - 1e8: exactly x, but float32 rounds x to a multiple of 8 on the way."""

    def forward(self, x):
        return (x + 1e8) - 1e8


def test_float64_arbitrates_where_the_fp32_reference_is_itself_off():
    """A result that misses torch's fp32 answer but matches the exact (float64) value at the same tolerance
    passes; one that misses both fails and names both values; without the arbiter the rule is unchanged."""
    from argus_agent.evaluate import ForwardRun, float64_reference, judge_trial

    x = torch.linspace(-3.0, 3.0, 64)
    ref = _Cancel()
    expected = ref(x)
    assert not torch.allclose(expected, x, atol=1e-4, rtol=1e-4)      # torch's fp32 answer is off
    exact = float64_reference(ref, [x])
    assert exact.dtype == torch.float64
    torch.testing.assert_close(exact, x.double(), atol=1e-7, rtol=0)      # float64 rounding only

    def judge(out, arbiter=True):
        run = ForwardRun(out, 1, [], "")
        return judge_trial(run, expected, [x], [x.clone()], 1e-4, set(), None,
                           exact=(lambda: float64_reference(ref, [x])) if arbiter else None)

    assert judge(x.clone()) == ""                                      # the exact value: correct
    assert "differ beyond" in judge(x.clone(), arbiter=False)
    why = judge(x + 0.5)
    assert "differ beyond atol=rtol=0.0001" in why and "float64 reference" in why
    assert judge(expected.clone()) == ""                               # torch's own answer still passes


def test_float64_reference_is_none_where_the_model_cannot_run_in_float64():
    from argus_agent.evaluate import float64_reference

    class Ints(torch.nn.Module):
        def forward(self, x):
            return torch.argmax(x, dim=0)

    class F32Only(torch.nn.Module):
        def forward(self, x):
            return x @ torch.ones(4, 4, dtype=torch.float32)

    assert float64_reference(Ints(), [torch.randn(4)]) is None
    assert float64_reference(F32Only(), [torch.randn(4, 4)]) is None


def test_rotation_count_makes_twice_the_cache_and_stops_at_the_cap():
    from argus_agent.evaluate import ROTATE_MAX_SETS
    from tilepy_hip.graphs import rotation_count

    l2 = 50 << 20
    assert rotation_count(40 << 20, l2) == 3           # 3 x 40 MB >= 100 MB, 2 x 40 MB is not
    assert rotation_count(100 << 20, l2) == 1          # one set is already twice the cache
    assert rotation_count(10 << 20, l2) == 10
    assert rotation_count(1 << 10, l2) == ROTATE_MAX_SETS  # a few KB: at most the cap
    assert rotation_count(0, l2) == 1 and rotation_count(1 << 20, 0) == 1


def test_timing_sets_are_empty_on_the_cpu(examples):
    from argus_agent.evaluate import timing_sets

    problem = _session(examples).problem
    assert timing_sets(problem, problem.shapes(1)[0], 0, "cpu", problem.base_inputs) == []
