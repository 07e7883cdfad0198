"""The random-program strategy (graphs.py) draws well-formed, exportable programs and reaches every op it knows."""

from __future__ import annotations

import torch
from hypothesis import given, settings

from .graphs import OPS, RandomProgram, Step, programs


@settings(max_examples=40, deadline=None)
@given(programs())
def test_programs_run_with_the_tracked_shapes(drawn):
    model, inputs = drawn
    env = dict(zip(model.input_shapes, inputs))
    env.update(model.named_parameters())
    assert all(tuple(env[n].shape) == model.shapes[n] for n in env)
    with torch.no_grad():
        for step in model.steps:
            env[step.out] = OPS[step.op](*(env[a] for a in step.args), *step.attrs)
            assert tuple(env[step.out].shape) == model.shapes[step.out], str(step)
            assert env[step.out].numel() <= 4096
        out = model(*inputs)
    assert torch.equal(out, env[model.steps[-1].out])
    assert torch.isfinite(out).all()


@settings(max_examples=15, deadline=None)
@given(programs())
def test_programs_export_and_match_eager(drawn):
    model, inputs = drawn
    exported = torch.export.export(model, tuple(inputs))
    with torch.no_grad():
        torch.testing.assert_close(exported.module()(*inputs), model(*inputs))


@settings(max_examples=3, deadline=None)
@given(programs(max_steps=8))
def test_programs_decompose_to_core_aten(drawn):
    model, inputs = drawn
    core = torch.export.export(model, tuple(inputs)).run_decompositions()
    with torch.no_grad():
        torch.testing.assert_close(core.module()(*inputs), model(*inputs))


def test_programs_reach_every_op_and_kind():
    seen: set[str] = set()

    @settings(max_examples=300, deadline=None, derandomize=True, database=None)
    @given(programs())
    def collect(drawn):
        seen.update(drawn[0].ops)

    collect()
    assert seen == set(OPS), sorted(set(OPS) - seen)


def test_repr_lists_the_program():
    model = RandomProgram({"x0": (2, 3)}, {"p0": (3,)}, [Step("v0", "add", ("x0", "p0")),
                                                         Step("v1", "sum", ("v0",), ((1,), True))])
    text = repr(model)
    assert "x0: input [2, 3]" in text and "p0: parameter [3]" in text
    assert "v1 = sum(v0, (1,), True)" in text
    x = torch.randn(2, 3)
    torch.testing.assert_close(model(x), (x + model.p0).sum(dim=1, keepdim=True))
