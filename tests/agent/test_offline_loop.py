"""The offline planner end to end on several problems, reproducibility, resume, outputs."""

import pytest

from argus_agent.candidate import load_model_new
from argus_agent.evaluate import evaluate
from argus_agent.loop import optimize
from argus_agent.lower.candidate import lower_problem
from argus_agent.planner import OfflinePlanner
from argus_agent.problem import load_problem


@pytest.mark.parametrize("name", ["swish_add", "scaled_softmax", "rms_norm", "matmul_relu"])
def test_offline_end_to_end(name, examples, history, tmp_path):
    out = tmp_path / "out"
    result = optimize(examples[name], target="cpu", budget=6, history=history, out_dir=out, seed=1, tune_evals=2)
    assert result.status == "done" and result.best_candidate is not None
    assert result.best_speedup is None and result.timing.startswith("skipped: no CUDA GPU")
    assert any(s.action.get("kind") in ("skill", "tune") and s.outcome == "correct" for s in result.steps)
    for f in ("model_new.py", "kernels.py", "summary.json", "summary.md"):
        assert (out / f).exists()
    # the emitted ModelNew passes the same guarded evaluation on its own
    problem = load_problem(examples[name])
    ev = evaluate(problem, load_model_new(out / "model_new.py", problem), tol=lower_problem(problem).tol)
    assert ev.correct, ev.message
    assert history.run(result.run_id)["status"] == "done"
    assert len(history.candidates(result.run_id)) == len(result.steps)


def test_seeded_offline_runs_are_reproducible(examples, history):
    a = optimize(examples["matmul_relu"], budget=5, history=history, seed=3, resume=False, tune_evals=2)
    b = optimize(examples["matmul_relu"], budget=5, history=history, seed=3, resume=False, tune_evals=2)
    assert [s.action for s in a.steps] == [s.action for s in b.steps]


def test_interrupted_run_resumes_where_it_stopped(examples, history):
    full = optimize(examples["scaled_softmax"], budget=6, history=history, seed=5, resume=False)

    class Stop(Exception):
        pass

    def interrupt(step):
        if step.iteration == 2:
            raise Stop

    with pytest.raises(Stop):
        optimize(examples["scaled_softmax"], budget=6, history=history, seed=5, progress=interrupt)
    run_id = history.runs(1)[0]["id"]
    assert history.run(run_id)["status"] == "interrupted" and len(history.candidates(run_id)) == 3
    resumed = optimize(examples["scaled_softmax"], budget=6, history=history, seed=5, planner=OfflinePlanner(5))
    assert resumed.run_id == run_id and resumed.summary["resumed"]
    assert len(history.candidates(run_id)) == 6
    assert [s.action for s in resumed.steps] == [s.action for s in full.steps]


def test_unsupported_op_names_the_op(tmp_path, history):
    from argus_agent.lower import LoweringError

    p = tmp_path / "histc.py"
    p.write_text("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x, y):\n"
                 "        return torch.histc(x + y, bins=7) + 1\n\ndef get_inputs():\n"
                 "    return [torch.randn(4, 8), torch.randn(4, 8)]\n\ndef get_init_inputs():\n    return []\n")
    with pytest.raises(LoweringError, match=r"histc.py:6: .*aten\.histc"):
        optimize(p, budget=2, history=history)
