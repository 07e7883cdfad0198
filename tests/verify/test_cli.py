"""The tilepy-verify command line: exit 0 clean, 1 violations, 2 usage/compile errors; text and JSON."""

from __future__ import annotations

import json
from pathlib import Path

from tilepy_verify.cli import main

ROOT = Path(__file__).resolve().parents[2]
GEMM = str(ROOT / "stdlib_kernels" / "gemm.py")
SEEDED = str(Path(__file__).with_name("seeded_kernels.py"))


def test_clean_kernel_exits_0(capsys):
    assert main([GEMM, "--target", "sm_80"]) == 0
    assert "verified: no errors" in capsys.readouterr().out


def test_param_expression_and_json(capsys):
    rc = main([GEMM, "--target", "gfx942", "--param", "INSTR=tp.amd.mfma_f32_32x32x8_bf16", "--json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["reports"][0]["constexprs"]["BM"] == 64


def test_violation_exits_1_with_counterexample(capsys):
    rc = main([SEEDED, "--kernel", "pipe_gemm", "--param", "BUG='wait'", "--target", "sm_80"])
    assert rc == 1
    out = capsys.readouterr().out
    assert "pipeline_hazard" in out and "counterexample" in out and "^" in out and "seeded_kernels.py:" in out


def test_violation_json(capsys):
    rc = main([SEEDED, "--kernel", "diverge", "--param", "BUG=warp0", "--json"])
    assert rc == 1
    doc = json.loads(capsys.readouterr().out)
    f = doc["reports"][0]["findings"][0]
    assert f["check"] == "barrier_divergence" and f["span"]["line"] > 0 and "warp" in f["counterexample"]


def test_performance_findings_do_not_fail(capsys):
    assert main([SEEDED, "--kernel", "columns", "--param", "BUG=noswizzle"]) == 0
    assert "bank_conflict" in capsys.readouterr().out


def test_usage_errors_exit_2(capsys):
    assert main(["/no/such/file.py"]) == 2
    assert main([GEMM, "--kernel", "nope"]) == 2
    assert main([GEMM, "--param", "NOPE=1"]) == 2
    assert main([GEMM, "--param", "BM"]) == 2
    assert main([]) == 2


def test_compile_error_exits_2(capsys):
    # K=24 is not a multiple of the instruction's k=16: a compile error naming file:line
    assert main([GEMM, "--target", "sm_80", "--param", "BK=24"]) == 2
    err = capsys.readouterr().err
    assert "error" in err
