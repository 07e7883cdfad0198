"""Errors of the command lines are one message with file:line and a hint, and the documented exit code: never
a traceback. Also: `emit --compile` without -o writes nothing into the current directory."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import stdlib_kernels
from argus_agent.cli import main

SOFTMAX = stdlib_kernels.softmax.__file__


def tool(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", *map(str, args)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, cwd=cwd)


def test_emit_on_a_syntax_error(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import tilepy as tp\n\ndef f(:\n    pass\n")
    r = tool("tilepy_hip", "emit", bad, "--kernel", "k", "--target", "sm_90a")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{bad}:3:" in r.stderr and "syntax error" in r.stderr and "hint:" in r.stderr


def test_emit_into_a_missing_directory(tmp_path):
    r = tool("tilepy_hip", "emit", SOFTMAX, "--kernel", "softmax", "--target", "sm_90a", "-o", tmp_path / "no" / "x.cu")
    assert r.returncode == 2 and "does not exist" in r.stderr and "mkdir -p" in r.stderr
    assert "Traceback" not in r.stderr


def test_emit_with_the_cache_pointing_at_a_file(tmp_path):
    f = tmp_path / "cache"
    f.write_text("")
    r = tool("tilepy_hip", "emit", SOFTMAX, "--kernel", "softmax", "--target", "sm_90a", "--compile",
             env={"TILEPY_HIP_CACHE": str(f)})
    assert r.returncode == 2 and "is a file, not a directory" in r.stderr and "hint:" in r.stderr


def test_emit_compile_without_out_writes_nothing_here(tmp_path):
    r = tool("tilepy_hip", "emit", SOFTMAX, "--kernel", "softmax", "--target", "sm_90a", "--compile",
             env={"TILEPY_HIP_CACHE": str(tmp_path / "cache")}, cwd=tmp_path)
    if r.returncode != 0:
        pytest.skip(f"no compiler here to build with: {r.stderr.strip().splitlines()[-1:]}")
    assert "kernel cache only" in r.stderr
    assert [p.name for p in Path(tmp_path).iterdir()] == ["cache"]


@pytest.mark.parametrize("cmd", [["tilepy_verify", SOFTMAX, "--json"],
                                 ["tilepy_hip", "emit", SOFTMAX, "--kernel", "softmax", "--target", "sm_90a"]])
def test_a_closed_pipe_is_not_a_traceback(cmd):
    p = subprocess.Popen([sys.executable, "-m", *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()                         # like `| head` that has already left
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) in (0, 1) and "BrokenPipeError" not in err and "Traceback" not in err


def test_optimize_on_a_get_inputs_that_raises(tmp_path):
    p = tmp_path / "raises.py"
    p.write_text("import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n\n\n"
                 "def get_inputs():\n    raise RuntimeError('boom')\n\n\ndef get_init_inputs():\n    return []\n")
    r = CliRunner().invoke(main, ["optimize", str(p), "--db", str(tmp_path / "h.db")])
    assert r.exit_code == 3 and f"{p}:10: get_inputs() raised RuntimeError: boom" in r.output
    assert "hint:" in r.output and "Traceback" not in r.output
