"""The PyTorch lowering: index algebra, every corpus problem at CPU sizes on the interpreter, verification of
the generated kernels, and clear errors for what is not lowered."""

import importlib.util
import itertools
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from argus_agent.lower import LoweringError, lower_model, render_program
from argus_agent.lower.candidate import lower_problem
from argus_agent.lower.index import Div, Mod, Sum, Var, flatten, unflatten
from argus_agent.problem import load_problem

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted((ROOT / "tests" / "problems").glob("level*/[0-9]*.py"))


def evaluate(e, env):
    """An index expression's value for loop variables bound in `env` (numpy arrays), by the definitions."""
    if isinstance(e, Var):
        return env[e.name]
    if isinstance(e, Div):
        return evaluate(e.x, env) // e.d
    if isinstance(e, Mod):
        return evaluate(e.x, env) % e.m
    if isinstance(e, Sum):
        out = np.full_like(next(iter(env.values())), e.c)
        for coef, a in e.terms:
            out = out + coef * evaluate(a, env)
        return out
    raise TypeError(e)


shapes = st.lists(st.integers(1, 7), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(shapes, st.data())
def test_views_compose_to_the_right_flat_index(shape, data):
    """permute / reshape / slice maps built from unflatten/flatten give numpy's element order, and a
    contiguous round trip simplifies back to the flat index itself."""
    n = int(np.prod(shape))
    i = Var("i", n)
    flat = np.arange(n)
    round_trip = flatten(unflatten(i, shape), shape)
    assert np.array_equal(evaluate(round_trip, {"i": flat}), flat)
    if n > 1:
        assert round_trip == i     # simplified away: the kernel reads a window, not a gather
    perm = data.draw(st.permutations(range(len(shape))))
    pshape = [shape[p] for p in perm]
    coords = unflatten(i, pshape)                     # coordinates in the permuted view
    src = [None] * len(shape)
    for k, p in enumerate(perm):
        src[p] = coords[k]
    got = evaluate(flatten(src, shape), {"i": flat})
    want = np.arange(n).reshape(shape).transpose(perm).reshape(-1)
    assert np.array_equal(got, want)
    split = data.draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
    merged = flatten(unflatten(flatten(unflatten(i, (n // split, split)), (n // split, split)), shape), shape)
    assert np.array_equal(evaluate(merged, {"i": flat}), flat)


def _load(source: str, tmp_path: Path, name: str):
    p = tmp_path / f"{name}.py"
    p.write_text(source)
    spec = importlib.util.spec_from_file_location(f"lowered_{name}_{abs(hash(source))}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_corpus_problem_lowers_and_matches_eager(path, tmp_path):
    """Every corpus problem, lowered whole at its CPU sizes, matches eager PyTorch (in float64) on fresh inputs
    at the precision PyTorch computes it, and its host program does no arithmetic of its own."""
    problem = load_problem(path, cpu=True)
    first = lower_problem(problem)
    assert first.program.kernels, "every program runs at least one kernel"
    assert first.tol <= 1e-2
    mod = _load(first.source, tmp_path, path.stem)
    model = problem.make_model()
    gen = torch.Generator().manual_seed(11)
    inputs = problem.draw_inputs(problem.shapes(1)[0], gen)
    with torch.no_grad():
        ref = model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        out = mod.argus_forward(model, *inputs)
    refs, outs = (ref if isinstance(ref, tuple) else (ref,)), (out if isinstance(out, tuple) else (out,))
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert o.shape == r.shape and o.dtype == r.dtype
        assert torch.allclose(o.double(), r.double(), atol=first.tol, rtol=first.tol, equal_nan=True), (
            f"max error {(o.double() - r.double()).abs().max():.3g} at tolerance {first.tol}")


@pytest.mark.parametrize("path", CORPUS[::20], ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_generated_kernels_verify_clean(path, tmp_path):
    """tilepy-verify proves the generated kernels race-free and in bounds (a sample of the corpus)."""
    from argus_agent.gates import verify_kernels

    problem = load_problem(path, cpu=True)
    mod = _load(lower_problem(problem).source, tmp_path, path.stem)
    import tilepy as tp

    kernels = {k: v for k, v in vars(mod).items() if isinstance(v, tp.Kernel)}
    verdict = verify_kernels(kernels, "sm_90a")
    assert verdict.ok, [f["message"] for f in verdict.findings if f["severity"] == "error"]


def test_fusion_makes_one_kernel_of_a_pointwise_chain_with_broadcast_parameters():
    class Chain(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.randn(6, 1, 1))
            self.register_buffer("shift", torch.randn(1, 5, 1))

        def forward(self, x, y):
            return torch.nn.functional.gelu(x * self.scale + y) - self.shift * 2.0

    prog = lower_model(Chain(), [torch.randn(6, 5, 7), torch.randn(7)])
    assert len(prog.kernels) == 1


def test_softmax_over_dim0_and_reductions_over_any_dims(tmp_path):
    class Red(torch.nn.Module):
        def forward(self, x):
            return torch.softmax(x, dim=0) + x.sum(dim=(0, 2), keepdim=True) + x.amax(dim=1, keepdim=True)

    x = torch.randn(5, 6, 7)
    model = Red()
    mod = _load(render_program(lower_model(model, [x])), tmp_path, "red")
    assert torch.allclose(mod.argus_forward(model, x), model(x), atol=1e-5, rtol=1e-5)


def test_unsupported_op_names_the_op_and_the_reference_line():
    class Odd(torch.nn.Module):
        def forward(self, x):
            return torch.atan2(x, x + 1)

    with pytest.raises(LoweringError, match=r"test_lowering.py:\d+: .*aten\.atan2"):
        lower_model(Odd(), [torch.randn(4)])


def test_plain_number_argument_is_checked_against_the_lowered_value(tmp_path):
    class Scale(torch.nn.Module):
        def forward(self, x, k: float):
            return x * k

    model = Scale()
    mod = _load(render_program(lower_model(model, [torch.randn(3), 2.5])), tmp_path, "scale")
    x = torch.randn(3)
    assert torch.equal(mod.argus_forward(model, x, 2.5), x * 2.5)
    with pytest.raises(ValueError, match="lower it again"):
        mod.argus_forward(model, x, 3.0)


def test_index_expressions_render_every_permutation_of_a_4d_tensor(tmp_path):
    for perm in itertools.islice(itertools.permutations(range(4)), 0, 24, 5):
        class Perm(torch.nn.Module):
            def forward(self, x, perm=perm):
                return x.permute(*perm).contiguous() * 2

        x = torch.randn(2, 3, 4, 5)
        model = Perm()
        mod = _load(render_program(lower_model(model, [x])), tmp_path, f"perm{''.join(map(str, perm))}")
        assert torch.equal(mod.argus_forward(model, x), model(x))
