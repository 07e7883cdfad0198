"""--precision: PyTorch's settings by default (read at capture), fp32 / tf32 / bf16 on request; what the lowered
matmuls and convolutions run, the tolerance, and the record in the candidate (interpreter, float64 references)."""

from __future__ import annotations

import pytest
import torch

from argus_agent.lower import lower_model, render_program
from argus_agent.lower.candidate import precision_of
from argus_agent.lower.precision import resolve
from argus_agent.lower.templates import ConvTemplate, MatmulTemplate


@pytest.fixture
def torch_flags():
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision(),
             torch.backends.cudnn.allow_tf32)
    yield
    torch.backends.cuda.matmul.allow_tf32 = saved[0]
    torch.set_float32_matmul_precision(saved[1])
    torch.backends.cudnn.allow_tf32 = saved[2]


def test_default_follows_pytorch(torch_flags):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.allow_tf32 = True
    p = resolve(None)
    assert (p.matmul, p.conv, p.asked) == ("fp32", "tf32", None)
    torch.set_float32_matmul_precision("high")
    torch.backends.cudnn.allow_tf32 = False
    assert (resolve(None).matmul, resolve(None).conv) == ("tf32", "fp32")
    assert resolve("bf16") == type(p)("bf16", "bf16", "bf16")
    with pytest.raises(ValueError, match="fp32, tf32, bf16"):
        resolve("fp16")


class MM(torch.nn.Module):
    def forward(self, a, b):
        return torch.relu(a @ b)


def test_bf16_matmul_rounds_operands_and_accumulates_in_f32(tmp_path):
    import importlib.util

    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(128, 256, generator=g), torch.randn(256, 128, generator=g)
    prog = lower_model(MM(), [a, b], "sm_90a", "bf16")
    p = tmp_path / "mm_bf16.py"
    p.write_text(render_program(prog))
    spec = importlib.util.spec_from_file_location("precision_mm_bf16", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        out = mod.argus_forward(MM(), a, b)
    assert any(isinstance(k, MatmulTemplate) for k in prog.kernels)      # the bf16 tensor-core GEMM
    want = torch.relu(a.bfloat16().double() @ b.bfloat16().double())    # bf16 operands, exact accumulation
    assert torch.allclose(out.double(), want, atol=1e-3, rtol=1e-3)
    exact = torch.relu(a.double() @ b.double())
    assert (out.double() - exact).abs().max() > 1e-3                      # it is not fp32: the operands were rounded
    text, tol = precision_of(prog, [a, b], on_gpu=False)
    assert text.startswith("bf16") and tol == 1e-2
    assert "PRECISION = 'bf16" in render_program(prog, text)


class Conv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv2d(16, 32, 3)

    def forward(self, x):
        return self.c(x)


@pytest.mark.parametrize("asked,split", [("fp32", True), ("tf32", False), ("bf16", False)])
def test_conv_precision_picks_the_pass(asked, split):
    x = torch.randn(2, 16, 20, 20)
    prog = lower_model(Conv(), [x], "sm_90a", asked)
    convs = [k for k in prog.kernels if isinstance(k, ConvTemplate)]
    assert len(convs) == 1 and convs[0].split is split
    text, tol = precision_of(prog, [x], on_gpu=False)
    assert text.startswith(asked)
    assert tol == (1e-2 if asked != "fp32" else tol) and tol <= 1e-2


def test_fp32_tolerance_stays_tight(torch_flags):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    prog = lower_model(MM(), [a, b], "cpu")
    text, tol = precision_of(prog, [a, b], on_gpu=True)
    assert text.startswith("fp32") and tol < 1e-3


def test_tf32_matmul_is_one_tf32_product(tmp_path):
    import importlib.util

    from argus_agent.lower.templates import Fp32GemmTemplate
    from tilepy.instructions import round_tf32

    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(96, 128, generator=g), torch.randn(128, 80, generator=g)
    for asked, passes in (("tf32", 1), ("fp32", 3)):
        prog = lower_model(MM(), [a, b], "sm_90a", asked)
        gemms = [k for k in prog.kernels if isinstance(k, Fp32GemmTemplate)]
        assert len(gemms) == 1 and gemms[0].passes == passes
    src = render_program(lower_model(MM(), [a, b], "sm_90a", "tf32"))
    assert "PASSES=1" in src
    p = tmp_path / "mm_tf32.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location("precision_mm_tf32", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        out = mod.argus_forward(MM(), a, b).double()
    ah = torch.from_numpy(round_tf32(a.numpy())).double()
    bh = torch.from_numpy(round_tf32(b.numpy())).double()
    assert torch.allclose(out, torch.relu(ah @ bh), atol=1e-4, rtol=1e-4)
    assert (out - torch.relu(a.double() @ b.double())).abs().max() > 1e-4     # TF32, not fp32


def test_the_reference_runs_at_the_asked_precision(torch_flags, monkeypatch):
    from argus_agent.lower.precision import matching_reference

    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.allow_tf32 = False
    with matching_reference("tf32") as p:
        assert p.asked == "tf32"
        assert torch.get_float32_matmul_precision() == "high" and torch.backends.cudnn.allow_tf32
    assert torch.get_float32_matmul_precision() == "highest" and not torch.backends.cudnn.allow_tf32
    monkeypatch.setenv("ARGUS_PRECISION", "bf16")     # what --precision sets for the run and its workers
    with matching_reference():
        assert torch.get_float32_matmul_precision() == "medium"
    monkeypatch.delenv("ARGUS_PRECISION")
    with matching_reference():                         # no request: PyTorch's settings are the precision
        assert torch.get_float32_matmul_precision() == "highest" and not torch.backends.cudnn.allow_tf32


def test_suite_json_records_the_precision(monkeypatch):
    from argus_agent.suite import suite_json

    monkeypatch.setenv("ARGUS_PRECISION", "tf32")
    row = {"name": "p", "correct": True, "speedup_eager": 1.2, "speedup_compile": None,
           "precision": "tf32 (kernels accumulate in fp32; matmuls in tf32)", "error": None}
    out = suite_json([row])
    assert out["precision"].startswith("tf32") and out["problems"][0]["precision"].startswith("tf32")


def test_cli_suite_precision_reaches_the_rows(tmp_path, examples, monkeypatch):
    """`argus suite --precision bf16`: printed, and every problem's row (lowered in a worker) records it."""
    import json
    import os
    import shutil

    from click.testing import CliRunner

    from argus_agent.cli import main

    monkeypatch.delenv("ARGUS_PRECISION", raising=False)
    d = tmp_path / "problems"
    d.mkdir()
    shutil.copy(examples["swish_add"], d / "a_swish_add.py")
    r = CliRunner().invoke(main, ["suite", str(d), "--budget", "1", "--precision", "bf16", "--json", "--db",
                                  str(tmp_path / "s.db")])
    try:
        assert r.exit_code == 0, r.output
        data = json.loads(r.stdout[r.stdout.index("{"):])
        assert data["precision"].startswith("bf16")
        assert data["problems"][0]["precision"].startswith("bf16"), data["problems"][0]
    finally:
        os.environ.pop("ARGUS_PRECISION", None)    # the CLI set it for its run (and workers)


def test_model_new_records_the_precision(examples):
    from argus_agent.emit import model_new_source
    from argus_agent.lower.candidate import lower_problem
    from argus_agent.problem import load_problem

    problem = load_problem(examples["swish_add"], cpu=True)
    first = lower_problem(problem, "cpu", "tf32")
    text = model_new_source(problem.source, first.source)
    assert f"PRECISION = {first.precision!r}" in text and first.precision.startswith("tf32")
    assert first.tol < 1e-3      # no matmul or convolution: nothing runs below fp32, the tolerance stays fp32's


def test_torch_compile_backend_takes_the_precision_option():
    import argus_agent.compile_backend  # noqa: F401  (registers backend="argus")

    torch._dynamo.reset()
    g = torch.Generator().manual_seed(9)
    a, b = torch.randn(32, 64, generator=g), torch.randn(64, 16, generator=g)
    out = torch.compile(MM(), backend="argus", options={"precision": "bf16"})(a, b).double()
    assert torch.allclose(out, torch.relu(a.bfloat16().double() @ b.bfloat16().double()), atol=1e-5, rtol=1e-5)
    assert (out - torch.relu(a.double() @ b.double())).abs().max() > 1e-3
    torch._dynamo.reset()


class _Lin3d(torch.nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.lin = torch.nn.Linear(k, n)

    def forward(self, x):
        return self.lin(x)


@pytest.mark.parametrize("shape, n", [((3, 37, 64), 48), ((2, 16, 8192), 16)])
def test_a_linear_on_a_3d_input_is_one_gemm_over_the_stacked_rows(shape, n, tmp_path):
    """A weight shared by every batch (a Linear on (B, L, K)): the fp32 GEMM runs once over the B * L rows, not
    B GEMMs of L rows (split-K too, the long-K case); matches float64 at fp32 accuracy on the interpreter."""
    import importlib.util

    from argus_agent.lower.templates import Fp32GemmTemplate

    g = torch.Generator().manual_seed(9)
    x = torch.randn(shape, generator=g)
    model = _Lin3d(shape[-1], n)
    prog = lower_model(model, [x], "sm_90a")
    (gemm,) = [k for k in prog.kernels if isinstance(k, Fp32GemmTemplate)]
    assert (gemm.batch, gemm.M) == (1, shape[0] * shape[1])
    assert gemm.out.numel == shape[0] * shape[1] * n * gemm.ksplit      # (the output, or the split-K partials)
    p = tmp_path / f"lin3d_{shape[-1]}.py"
    p.write_text(render_program(prog))
    spec = importlib.util.spec_from_file_location(f"precision_lin3d_{shape[-1]}", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with torch.no_grad():
        out = mod.argus_forward(model, x).double()
        want = x.double() @ model.lin.weight.double().T + model.lin.bias.double()
    assert out.shape == want.shape and torch.allclose(out, want, atol=1e-5, rtol=1e-5), (out - want).abs().max()
