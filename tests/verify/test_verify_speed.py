"""Issue 17 item 4: every stdlib kernel preset verifies in under 2 s on 2 CPU cores (benchmarks/verify_speed.py
lists them all and names the slowest). The speed comes from not redoing work (tilepy_verify/vc.py): a term
renamed again with an equal mapping is the same object, so its encoding and its answer are reused; queries go
to Z3's C API, one context for all runs. None of that may change an answer: the seeded wrong-stage reads below
are still counterexamples, and substitution agrees with evaluation.

Timings are CPU seconds, and relative to gemm_hopper's default verified just before and after each kernel: on a
loaded machine both slow down alike, so the budget scales with the reference's slowdown over its quiet time."""

import importlib.util
import os
import random
import sys
import time
from pathlib import Path

import pytest

import tilepy_verify as tv
from stdlib_kernels import attention, gemm_hopper
from tilepy.symbolic import Var, evaluate
from tilepy_verify.vc import AND, Solver_, cmp, evaluate_term, subst

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from benchmarks import verify_speed  # noqa: E402

BUDGET = 2.0
REFERENCE_QUIET = 0.7  # seconds: gemm_hopper's default, CPU time on the 2-core machine (verify_speed-cpu.json)
# the slowest presets of benchmarks/verify_speed.py before the solver work (4-10 s then)
SLOW = ["attention_fwd[d64, causal]", "attention_fwd[d128]", "attention_decode[d64, q4]",
        "gemm_hopper[policy small]", "gemm_hopper[policy unaligned]", "moe_gemm13[PRESETS]",
        "gemm_streamk[narrow]",  # stream-K's 6-stage launch preset: 2.1-3.9 s before its ring work (V6)
        "gemm_splitk_swap[K_WAYS 2, 64x32 s8]"]  # two rings, three roles: 1.2 s before the deadlock check's hops
#                                                  by iterations of the loop as written, 0.4-0.5 s after (V9)


def _cold(kernel, target, params):
    """(CPU seconds of this process, report) of a cold verification: CPU time, not wall time, so that waiting
    for a CPU on a loaded machine does not count (the verifier is single-threaded)."""
    kernel._cache.clear()
    kir = kernel.ir(target, **params)
    t0 = time.process_time()
    report = tv.verify_ir(kir)
    return time.process_time() - t0, report


def _reference():
    return _cold(gemm_hopper.gemm_hopper, "sm_90a", gemm_hopper.PRESETS["sm_90a"])[0]


def _case(name):
    for case in verify_speed.cases():
        if case[0] == name:
            return case[1:]
    raise KeyError(name)


def test_every_stdlib_kernel_and_preset_is_listed():
    names = [c[0] for c in verify_speed.cases()]
    assert len(names) == len(set(names))
    for want in SLOW + ["attention_decode[d128, q1]", "conv_igemm[sm_90a]", "gemm_fp32[sm_90a]", "moe_gemm2[SMALL_M]",
                        "gemm_hopper[policy large]", "gemm_hopper[policy skinny]"]:
        assert want in names


@pytest.mark.parametrize("name", SLOW)
def test_slowest_presets_verify_clean_within_budget(name):
    """Under 2 s of CPU; on a machine so loaded that even CPU time stretches, within 2 s scaled by the
    reference's slowdown (measured just before and just after, the larger)."""
    before = _reference()
    took, report = _cold(*_case(name))
    assert report.ok and not report.findings, str(report)
    if took >= BUDGET:  # timing noise on a shared machine: the better of two cold runs, as benchmarks take it
        took = min(took, _cold(*_case(name))[0])
    if took >= BUDGET:
        base = max(before, _reference())
        allowed = BUDGET * max(1.0, base / REFERENCE_QUIET)
        assert took < allowed, (name, took, base, allowed)


_SERIAL = "# P[i, c] weighs key j * BN + c\n" + " " * 24


def _attention_with(tmp_path, good, bad):
    src = Path(attention.__file__).read_text()
    assert src.count(good) == 1, good
    path = tmp_path / "seeded_attention.py"
    path.write_text(src.replace(good, bad))
    spec = importlib.util.spec_from_file_location("seeded_attention", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, src[:src.index(good) + len(good)].count("\n") + 1     # the line of good's last line


@pytest.mark.parametrize("kernel,good,bad,params", [
    # the serial consumer multiplies P by the next stage's V tile (not yet waited for); the PAIRED consumer has the
    # same line: the unpaired one is the line after its "key j * BN" comment
    ("attention_fwd", _SERIAL + "o = tp.mma(p16, v_s[j % STAGES], o)",
     _SERIAL + "o = tp.mma(p16, v_s[(j + 1) % STAGES], o)", {**attention.PRESETS[64], "PIPELINE": False}),
    # the decode consumer reads K from the stage after the one it waited for
    ("attention_decode", "sc = tp.mma(q_s[p], k_s[s * DP + p].T, sc)",
     "sc = tp.mma(q_s[p], k_s[((s + 1) % STAGES) * DP + p].T, sc)", {"HEAD_DIM": 64, "STAGES": 4}),
])
def test_wrong_stage_in_the_ring_is_still_caught(tmp_path, kernel, good, bad, params):
    mod, line = _attention_with(tmp_path, good, bad)
    report = tv.verify(getattr(mod, kernel), **params)
    hits = [f for f in report.errors if f.check == "pipeline_hazard" and f.span.line == line]
    assert hits, str(report)
    clean = tv.verify(getattr(attention, kernel), **params)
    assert clean.ok, str(clean)


def test_substitution_memo_agrees_with_evaluation():
    """A repeated renaming is the same object, and every renaming evaluates as the original under the
    substituted environment (random affine / floor-div / mod / xor terms and comparisons)."""
    rng = random.Random(17)
    names = ["i", "j", "k", "n"]

    def term(depth):
        if depth == 0 or rng.random() < 0.3:
            return Var(rng.choice(names))
        a, op = term(depth - 1), rng.choice(["+", "-", "*", "//", "%", "^"])
        if op == "+":
            return a + term(depth - 1)
        if op == "-":
            return a - term(depth - 1)
        if op == "*":
            return a * rng.randint(-3, 4)
        if op == "//":
            return a // rng.randint(1, 7)
        if op == "%":
            return a % rng.randint(1, 7)
        return (a % 16) ^ (term(depth - 1) % 16)

    for _ in range(300):
        e = term(4)
        c = AND(cmp("<", term(3), term(3)), cmp("==", term(2) % 4, rng.randint(0, 3)))
        mapping = {rng.choice(names): Var("i") * 2 + rng.randint(0, 3)}
        for t in (e, c):
            once, twice = subst(t, mapping), subst(t, dict(mapping))
            assert once is twice
            for _ in range(4):
                env = {n: rng.randint(-20, 20) for n in names}
                inner = {**env, **{k: evaluate(v, env) for k, v in mapping.items()}}
                assert evaluate_term(once, env) == evaluate_term(t, inner)


def test_solver_answers_are_exact_across_runs():
    """Two runs on the shared Z3 context: a floor-division / xor query is answered by a model that satisfies
    it, its negation with its ranges is unsatisfiable, and nothing leaks from the first run into the second."""
    x, y = Var("x"), Var("y")
    q = AND(cmp("==", (x // 8) * 8 + x % 8, x), cmp("==", (x ^ 5) % 8, 3), cmp(">", x, 100), cmp("<", y, x))
    for _ in range(2):
        s = Solver_()
        m = s.check(q)
        assert m is not None and evaluate_term(q, m)
        assert s.check(AND(cmp(">", x, 100), cmp("<", x, 50))) is None
        assert s.check(cmp("!=", (x // 8) * 8 + x % 8, x)) is None
        s.close()
