"""Matrix-vector products (issue 12): `mv`, `matmul` with a 1-D operand and a (1, K) @ (K, N) product are
bandwidth-bound, so they lower to one row (or column) reduction that reads the matrix once, never to a GEMM
template, also on sm_90a at sizes where a matrix product would take one; the interpreter's result matches
float64."""

import importlib.util

import pytest
import torch

from argus_agent.lower import lower_model, render_program
from argus_agent.lower.core import Reduction, RowFused


class MatVec(torch.nn.Module):
    def forward(self, a, v):
        return torch.matmul(a, v)


class Mv(torch.nn.Module):
    def forward(self, a, v):
        return torch.mv(a, v)


class VecMat(torch.nn.Module):
    def forward(self, x, w):
        return x @ w


def _only_reduction(prog, mode):
    """The program's one kernel: a sum reduction in `mode`, or (rows) a fused row kernel of one sum stage
    (a bf16 result's cast is computed on the row's sum, in the same kernel)."""
    (k,) = prog.kernels
    if isinstance(k, RowFused) and mode == "row":
        (k,) = k.stages
    assert isinstance(k, Reduction) and k.kind == "sum" and k.mode == mode, prog.kernels
    return k


@pytest.mark.parametrize("model,shapes,dtype,mode", [
    (MatVec(), [(2048, 1024), (1024,)], torch.float32, "row"),
    (MatVec(), [(2048, 1024), (1024,)], torch.bfloat16, "row"),
    (Mv(), [(1024, 2048), (2048,)], torch.float32, "row"),
    (VecMat(), [(1, 2048), (2048, 1024)], torch.bfloat16, "col"),
    (VecMat(), [(1, 2048), (2048, 1024)], torch.float32, "col"),
])
def test_matrix_vector_is_one_reduction_not_a_gemm_template_on_sm90a(model, shapes, dtype, mode):
    inputs = [torch.zeros(*s, dtype=dtype) for s in shapes]
    k = _only_reduction(lower_model(model, inputs, target="sm_90a"), mode)
    M, K = shapes[0] if mode == "row" else (shapes[1][1], shapes[0][1])
    assert (k.M, k.R) == (M, K)


@pytest.mark.parametrize("model,shapes", [
    (MatVec(), [(61, 53), (53,)]),
    (Mv(), [(40, 70), (70,)]),
    (VecMat(), [(1, 37), (37, 29)]),
])
def test_matrix_vector_on_the_interpreter_matches_float64(model, shapes, tmp_path):
    g = torch.Generator().manual_seed(7)
    inputs = [torch.randn(*s, generator=g) for s in shapes]
    prog = lower_model(model, inputs)
    assert len(prog.kernels) == 1 and isinstance(prog.kernels[0], Reduction)
    path = tmp_path / "mv.py"
    path.write_text(render_program(prog))
    spec = importlib.util.spec_from_file_location(f"lowered_mv_{id(model)}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        got = mod.argus_forward(model, *inputs)
        ref = model(*[x.double() for x in inputs])
    assert torch.allclose(got.double(), ref, atol=1e-5, rtol=1e-5)
