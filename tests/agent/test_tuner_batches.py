"""The tuner's stage 1 runs a batch of points at once (parallel children in the optimize loop) before their
evaluations, which stay one at a time; a verifier verdict is remembered per candidate source."""

import json

import tilepy as tp
from argus_agent import gates
from argus_agent.evaluate import Evaluation
from argus_agent.tuner import BATCH, make_template, tune

SOURCE = '''
import torch

import tilepy as tp
from argus_agent.runtime import launch


@tp.kernel(threads=128)
def scale(X: tp.Tensor[tp.f32, "N"], Z: tp.Tensor[tp.f32, "N"], BLOCK: tp.constexpr = 1024):
    i0 = tp.block_id(0) * BLOCK
    tp.store(Z[i0:i0 + BLOCK], tp.load(X[i0:i0 + BLOCK]) * 2.0)


def argus_forward(model, x):
    out = torch.empty_like(x)
    launch(scale, lambda m: (tp.cdiv(m["N"], m["BLOCK"]),), x.view(-1), out.view(-1))
    return out
'''


def _recorder(infeasible=()):
    calls = {"many": [], "one": [], "evals": []}

    def many(srcs):
        calls["many"].append(list(srcs))
        return [("too big" if any(f"BLOCK: tp.constexpr = {b}" in s for b in infeasible) else "") for s in srcs]

    def one(src, target, directory):
        calls["one"].append(src)
        return ""

    def evaluate(src):
        calls["evals"].append(src)
        assert all(src in batch for batch in calls["many"][-1:]) or src in calls["one"]
        return Evaluation(True, "", speedup=1.0 + 0.001 * len(calls["evals"]))

    return calls, many, one, evaluate


def test_exhaustive_search_runs_stage_one_once_for_every_point(tmp_path):
    tpl = make_template(SOURCE)
    assert tpl.size() <= 16
    calls, many, one, evaluate = _recorder(infeasible=("4096",))
    res = tune(SOURCE, evaluate, "cpu", tmp_path, max_evals=16, feasible=one, feasible_many=many)
    assert len(calls["many"]) == 1 and len(calls["many"][0]) == tpl.size() and not calls["one"]
    bad = [r for r in res.rows if not r["feasible"]]
    assert bad and all(r["point"]["scale.BLOCK"] == "4096" and r["note"] == "too big" for r in bad)
    assert len(calls["evals"]) == tpl.size() - len(bad)        # infeasible points are never evaluated
    assert res.best_speedup == max(r["speedup"] for r in res.rows if r["feasible"])


def test_sampled_search_asks_points_in_batches(tmp_path):
    tpl = make_template(SOURCE)
    n = 11
    assert tpl.size() > n
    calls, many, one, evaluate = _recorder()
    res = tune(SOURCE, evaluate, "cpu", tmp_path, max_evals=n, feasible=one, feasible_many=many)
    assert "batches of" in res.method and len(res.rows) == n
    assert 1 <= len(calls["many"]) <= -(-n // BATCH) and all(len(b) <= BATCH for b in calls["many"])
    # a point repeated within the search is built and verified once
    built = calls["one"] + [src for batch in calls["many"] for src in batch]
    assert len(built) == len(set(built))


def test_a_verdict_is_remembered_per_source_and_a_corrupt_entry_is_recomputed(tmp_path, monkeypatch):
    seen = []

    def fake_verify(kernels, target):
        seen.append(target)
        return gates.Verdict("verified", "1 kernel(s) verified", [], 0.5)

    monkeypatch.setattr(gates, "verify_kernels", fake_verify)
    v1 = gates.verify_cached({}, "sm_90a", tmp_path, "abc123")
    v2 = gates.verify_cached({}, "sm_90a", tmp_path, "abc123")
    assert v1.to_dict() == v2.to_dict() and len(seen) == 1
    gates.verify_cached({}, "sm_90a", tmp_path, "other")          # another source: verified again
    assert len(seen) == 2
    (entry,) = tmp_path.glob("abc123-*.json")
    entry.write_text("{not json")
    v3 = gates.verify_cached({}, "sm_90a", tmp_path, "abc123")
    assert v3.status == "verified" and len(seen) == 3 and json.loads(entry.read_text())["status"] == "verified"


def test_the_verdict_key_follows_the_verifier_code():
    d = gates.verifier_digest()
    assert len(d) == 16 and d == gates.verifier_digest()


def test_a_register_estimate_vetoes_only_where_nothing_will_be_compiled():
    over = gates.Resources(256, 1024, 472, "estimate")
    assert "registers" in gates.estimate_veto(over, "sm_90a", can_compile=False)
    assert gates.estimate_veto(over, "sm_90a", can_compile=True) == ""       # the compiler's count decides
    too_many_threads = gates.Resources(4096, 1024, 472, "estimate")
    assert "threads" in gates.estimate_veto(too_many_threads, "sm_90a", can_compile=True)
    too_much_shared = gates.Resources(256, 10**7, 32, "estimate")
    assert "shared memory" in gates.estimate_veto(too_much_shared, "sm_90a", can_compile=True)


def test_the_build_gate_compiles_the_kernels_the_host_launches():
    src = SOURCE + '''

@tp.kernel(threads=128)
def unused(X: tp.Tensor[tp.f32, "N"], BLOCK: tp.constexpr = 256):
    tp.store(X[0:BLOCK], tp.load(X[0:BLOCK]))


derived = scale
'''
    assert gates.host_launched(src, {"scale", "unused", "derived"}) == {"scale"}
    # a host that names no kernel (or a source that does not parse): every kernel is compiled
    assert gates.host_launched("def f():\n    return 1\n", {"a", "b"}) == {"a", "b"}
    assert gates.host_launched("def (:", {"a"}) == {"a"}


def test_spills_do_not_veto_a_compiled_kernel():
    spilled = gates.Resources(384, 172128, 168, "compiled", spills=504)
    assert gates.fits(spilled, "sm_90a") and gates.compiled_veto(spilled, "sm_90a") == ""
    assert "registers" in gates.compiled_veto(gates.Resources(384, 1024, 300, "compiled"), "sm_90a")


def test_the_interpreter_target_is_not_vetoed_by_a_register_estimate():
    """Target cpu runs the interpreter: a kernel estimated over 255 registers (every tile live at once) is not
    refused there; on a GPU target with nothing to compile it still is."""

    @tp.kernel(threads=128)
    def wide(X: tp.Tensor[tp.f32, "M", "N"], Y: tp.Tensor[tp.f32, "M", "N"], BM: tp.constexpr = 128,
             BN: tp.constexpr = 128):
        a = tp.load(X[0:BM, 0:BN])
        b = tp.load(Y[0:BM, 0:BN])
        c = a * b
        tp.store(X[0:BM, 0:BN], c * a + b)
    assert gates.estimate(wide, "cpu").registers > 255
    src = "def f(x, y):\n    launch(wide, (1,), x, y)\n"
    assert gates.build_check({"wide": wide}, src, "cpu", can_compile=False) == ("", "")
    outcome, why = gates.build_check({"wide": wide}, src, "sm_90a", can_compile=False)
    assert outcome == "infeasible" and "registers" in why
