"""Shared by the lowering tests: lower a module, render its host program, import and run it, and compare with
the module run in float64."""

from __future__ import annotations

import importlib.util

import torch

from argus_agent.lower import lower_model, render_program


def run_lowered(model, inputs, tmp_path, name, target="sm_90a", prefix="lowered"):
    """(program, rendered source, output of the lowered program, float64 reference) for `model(*inputs)`."""
    prog = lower_model(model, inputs, target)
    src = render_program(prog)
    p = tmp_path / f"{name}.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(f"{prefix}_{name}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        out = mod.argus_forward(model, *inputs)
        ref = model.double()(*[x.double() if x.is_floating_point() else x for x in inputs])
    model.float()
    return prog, src, out, ref


def assert_close(out, ref, tol):
    """An fp32 output equal to the float64 reference within atol = rtol = tol."""
    assert out.shape == ref.shape and out.dtype == torch.float32
    err = (out.double() - ref).abs().max().item()
    assert torch.allclose(out.double(), ref, atol=tol, rtol=tol), f"max error {err:.3g} at tolerance {tol}"
