"""Red team: scripted hostile candidates against the sandbox. Each bypass class of the evaluation is rejected,
and the verdict stays the parent's even where the source rules are switched off."""

import pytest
import torch

from argus_agent import policy
from argus_agent.problem import load_problem
from argus_agent.sandbox import Sandbox

KERNEL = '''
import torch

import tilepy as tp
from argus_agent.runtime import launch


@tp.kernel(threads=128)
def swish_add(X0: tp.Tensor[tp.f32, "N"], X1: tp.Tensor[tp.f32, "N"], Z: tp.Tensor[tp.f32, "N"],
              BLOCK: tp.constexpr = 1024):
    i0 = tp.block_id(0) * BLOCK
    x0 = tp.load(X0[i0:i0 + BLOCK])
    x1 = tp.load(X1[i0:i0 + BLOCK])
    tp.store(Z[i0:i0 + BLOCK], STORED)
'''
HONEST = KERNEL.replace("STORED", "x0 * tp.sigmoid(x0) + x1")
ZEROS = KERNEL.replace("STORED", "x1 * 0.0")
FORWARD = '''

def argus_forward(model, x, y):
    out = torch.empty_like(x)
    launch(swish_add, lambda m: (tp.cdiv(m["N"], m["BLOCK"]),), x.contiguous().view(-1), y.contiguous().view(-1),
           out.view(-1))
    return out
'''


@pytest.fixture
def box(examples, tmp_path):
    def make(**limits):
        problem = load_problem(examples["swish_add"])
        return Sandbox(problem, examples["swish_add"], "cpu", cpu=True, cpu_scale=1, gpu=False, gpu_why="no GPU",
                       tol=1e-4, seed=0, work_dir=tmp_path / "cands", warmup=1, runs=1, limits=limits or None)
    return make


def test_an_honest_candidate_is_correct_in_its_child(box):
    out = box().check(HONEST + FORWARD)
    assert out.outcome == "correct", out.message
    assert out.evaluation.launches >= 2 and set(out.stage_seconds) >= {"build", "verify", "test"}


def test_the_verdict_is_the_parents_own(box):
    out = box().check(ZEROS + FORWARD)
    assert out.outcome == "test-failed" and "wrong result" in out.message


@pytest.mark.parametrize("patch", [
    "torch.allclose = lambda *a, **k: True\ntorch.isclose = lambda a, b, **k: torch.ones_like(a, dtype=torch.bool)",
    "import builtins\nbuiltins.abs = lambda x: 0",
    "import numpy\nnumpy.allclose = lambda *a, **k: True",
    "torch.Tensor.float = lambda self: self",
])
def test_monkeypatching_is_forbidden_and_changes_no_verdict(box, patch, monkeypatch):
    source = ZEROS + FORWARD + "\n" + patch + "\n"
    out = box().check(source)
    assert out.outcome == "forbidden", out.message
    assert "candidate.py:" in out.message and "hint:" in out.message
    # Without the source rules the patch runs in the child, and changes nothing: the parent judges.
    monkeypatch.setattr(policy, "check_source", lambda *a: "")
    out = box().check(source)
    assert out.outcome in ("test-failed", "import-error", "crashed"), out.message
    assert torch.allclose(torch.zeros(2), torch.ones(2)) is False


@pytest.mark.parametrize("host, reason", [
    ("    with torch._C.DisableTorchFunction():\n        return x * torch.sigmoid(x) + y\n", "torch._C"),
    ("    return torch.ops.aten.add(torch.ops.aten.mul(x, torch.ops.aten.sigmoid(x)), y)\n", "torch.ops"),
    ("    import ctypes\n    ctypes.CDLL('libcublas.so')\n    return out\n", "ctypes"),
    ("    s = torch.cuda.Stream()\n    return out\n", "torch.cuda.Stream"),
    ("    import threading\n    threading.Thread(target=lambda: None).start()\n    return out\n", "threading"),
    ("    return open('/tmp/expected.pt').read()\n", "open"),
    ("    f = getattr(torch, 'sig' + 'moid')\n    return x * f(x) + y\n", "getattr"),
    ("    return x.__class__.__mul__(x, torch.sigmoid(x)) + y\n", "__class__"),
])
def test_reaching_past_the_guard_is_forbidden(box, host, reason):
    forward = FORWARD.replace("    return out\n", "") + host
    out = box().check(ZEROS + forward)
    assert out.outcome == "forbidden" and reason in out.message, out.message


def test_torch_arithmetic_in_the_host_is_rejected(box):
    forward = FORWARD.replace("    return out\n", "    return x * x.sigmoid() + y\n")   # methods: seen at run time
    out = box().check(ZEROS + forward)
    assert out.outcome == "test-failed" and "outside tilepy kernels" in out.message and "sigmoid" in out.message


def test_calling_the_reference_to_read_its_output_is_rejected(box):
    forward = FORWARD.replace("    return out\n", "    return type(model).mro()[1].forward(model, x, y)\n")
    out = box().check(ZEROS + forward)
    assert out.outcome == "test-failed" and "outside tilepy kernels" in out.message


def test_torch_inside_a_launch_callback_is_still_the_hosts(box):
    # The threads= callable runs inside the launch (BLOCK=512 is a new specialization, built there); it
    # computes the answer into a stash the host returns.
    source = HONEST.replace("@tp.kernel(threads=128)", "@tp.kernel(threads=cheat)").replace(
        "import torch\n", "import torch\nSTASH = []\n\n\ndef cheat(c):\n    if STASH:\n"
        "        x, y, out = STASH[0]\n        out.copy_(x * x.sigmoid() + y)\n    return 128\n", 1)
    source = source.replace("tp.store(Z[i0:i0 + BLOCK], x0 * tp.sigmoid(x0) + x1)", "tp.store(Z[i0:i0 + BLOCK], x1)")
    forward = FORWARD.replace("    out = torch.empty_like(x)\n", "    out = torch.empty_like(x)\n    STASH.clear()\n"
                              "    STASH.append((x, y, out))\n").replace("out.view(-1))", "out.view(-1), BLOCK=512)")
    out = box().check(source + forward)
    assert out.outcome == "test-failed" and "outside tilepy kernels" in out.message, out.message


def test_aliasing_and_writes_survive_the_process_boundary(box):
    returns_input = FORWARD.replace("    return out\n", "    return y\n")
    out = box().check(HONEST + returns_input)
    assert out.outcome == "test-failed" and "returned one of its inputs" in out.message
    writes_input = FORWARD.replace("    return out\n", "    launch(swish_add, lambda m: (tp.cdiv(m['N'], m['BLOCK']),),"
                                   " x.view(-1), y.view(-1), y.view(-1))\n    return out\n")
    out = box().check(HONEST + writes_input)
    assert out.outcome == "test-failed" and "modified its inputs" in out.message


def test_a_reused_output_buffer_is_caught_across_the_process_boundary(box):
    # correct values each call, but the second call returns the first call's storage
    cached = FORWARD.replace("    out = torch.empty_like(x)\n",
                             "    if not BUF:\n        BUF.append(torch.empty_like(x))\n    out = BUF[0]\n")
    cached = cached.replace("def argus_forward", "BUF = []\n\n\ndef argus_forward")
    out = box().check(HONEST + cached)
    assert out.outcome == "test-failed" and "same storage as on the previous call" in out.message, out.message


def test_the_facts_the_child_reports_do_not_follow_a_rebound_torch(box, monkeypatch):
    # the child reports whether the inputs were written; with the source rules off, a candidate that rebinds
    # torch.equal (and the Tensor methods) in its process still gets caught writing its input
    writes_input = FORWARD.replace("    return out\n", "    launch(swish_add, lambda m: (tp.cdiv(m['N'], m['BLOCK']),),"
                                   " x.view(-1), y.view(-1), y.view(-1))\n    return out\n")
    patch = ("\ntorch.equal = lambda *a, **k: True\ntorch.Tensor.isnan = lambda self: torch.ones_like(self, "
             "dtype=torch.bool)\n")
    monkeypatch.setattr(policy, "check_source", lambda *a: "")
    out = box().check(HONEST + writes_input + patch)
    assert out.outcome == "test-failed" and "modified its inputs" in out.message, out.message


@pytest.mark.parametrize("where, stage", [("import", "build"), ("host", "test")])
def test_an_endless_loop_is_killed_at_its_stage_limit(box, where, stage):
    if where == "import":
        source = HONEST + FORWARD + "\nwhile True:\n    pass\n"
    else:
        source = HONEST + FORWARD.replace("    return out\n", "    while True:\n        pass\n")
    out = box(build=4, test=3).check(source)
    assert out.outcome == "timeout" and f"the {stage} stage ran over" in out.message
    assert out.stage_seconds[stage] < 10


def test_a_dying_child_is_a_crash_not_a_hang(box, monkeypatch):
    monkeypatch.setattr(policy, "check_source", lambda *a: "")
    source = HONEST + FORWARD.replace("    return out\n", "    import os\n    os._exit(7)\n")
    out = box().check(source)
    assert out.outcome == "crashed" and "exit code 7" in out.message


def test_the_sandbox_works_from_a_script_on_stdin(examples, tmp_path):
    import subprocess
    import sys

    script = (f"from argus_agent.problem import load_problem\nfrom argus_agent.sandbox import Sandbox\n"
              f"p = {str(examples['swish_add'])!r}\n"
              f"box = Sandbox(load_problem(p), p, 'cpu', cpu=True, cpu_scale=1, gpu=False, gpu_why='', tol=1e-4, "
              f"seed=0, work_dir={str(tmp_path)!r}, warmup=1, runs=1)\n"
              f"print(box.check({HONEST + FORWARD!r}).outcome)\n")
    r = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True, timeout=300)
    assert r.stdout.strip().endswith("correct"), r.stderr[-2000:]
