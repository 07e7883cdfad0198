"""A sandbox child loads a problem from the parent's signature (no get_inputs() at full size, no Model built):
it must plan and draw exactly the trials the parent draws."""

from pathlib import Path

import pytest
import torch

from argus_agent.evaluate import draw_trial, trial_plan
from argus_agent.problem import load_problem

PROBLEMS = Path(__file__).resolve().parents[1] / "problems"


@pytest.mark.parametrize("name", ["level1/001_relu", "level1/196_embedding_bag_mean", "level1/043_sum_dim1"])
def test_a_problem_loaded_from_its_signature_draws_the_same_trials(name):
    path = PROBLEMS / f"{name}.py"
    full = load_problem(path, cpu=True)
    sig = full.signature()
    assert sig is not None
    light = load_problem(path, cpu=True, signature=sig)
    assert all(x.device.type == "meta" for x in light.base_inputs if isinstance(x, torch.Tensor))
    assert light.kept_sizes == full.kept_sizes
    for trial_seed in (0, 3):
        a, b = trial_plan(full, 3, 0, trial_seed), trial_plan(light, 3, 0, trial_seed)
        assert a == b
        for (sh, g), _ in zip(a, b):
            xs, ys = draw_trial(full, sh, g, "cpu"), draw_trial(light, sh, g, "cpu")
            assert len(xs) == len(ys)
            for x, y in zip(xs, ys):
                if isinstance(x, torch.Tensor):
                    assert x.dtype == y.dtype and torch.equal(x, y)
                else:
                    assert x == y


def test_integer_inputs_keep_their_bound():
    path = PROBLEMS / "level1/196_embedding_bag_mean.py"
    full = load_problem(path, cpu=True)
    ints = [(i, x) for i, x in enumerate(full.base_inputs) if isinstance(x, torch.Tensor)
            and not x.dtype.is_floating_point]
    assert ints, "the problem has an integer input"
    light = load_problem(path, cpu=True, signature=full.signature())
    for i, x in ints:
        assert light.int_hi[i] == int(x.max()) + 1
