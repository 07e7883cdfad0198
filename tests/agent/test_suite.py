"""`argus suite`: problems through the pipeline, rows with errors instead of crashes, fast_p, resume, worker
processes and Ray, one history."""

import json
import shutil

import pytest
from click.testing import CliRunner

from argus_agent.cli import main
from argus_agent.report import fast_p, render_suite_report, solved_share
from argus_agent.suite import run_suite

RAISES = '''import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x + 1


def get_inputs():
    raise ValueError("no inputs today")


def get_init_inputs():
    return []
'''
NOT_KERNELBENCH = "import torch\n\nX = 1\n"


@pytest.fixture
def suite_dir(tmp_path, examples):
    d = tmp_path / "problems"
    d.mkdir()
    shutil.copy(examples["swish_add"], d / "a_swish_add.py")
    (d / "b_raises.py").write_text(RAISES)
    (d / "c_not_kernelbench.py").write_text(NOT_KERNELBENCH)
    return d


def test_suite_rows_errors_and_fast_p(suite_dir, history):
    seen = []
    suite_id, rows, fp = run_suite(suite_dir, "cpu", 2, history=history, progress=lambda i, n, r: seen.append(i))
    by = {r["name"]: r for r in rows}
    assert list(by) == ["a_swish_add", "b_raises", "c_not_kernelbench"] and seen == [1, 2, 3]
    assert by["a_swish_add"]["correct"] and by["a_swish_add"]["error"] is None
    assert by["a_swish_add"]["speedup_eager"] is None and by["a_swish_add"]["speedup_compile"] is None  # no GPU
    assert not by["b_raises"]["correct"] and "no inputs today" in by["b_raises"]["error"]
    assert "b_raises.py:" in by["b_raises"]["error"]                      # where it raised
    assert "get_init_inputs" in by["c_not_kernelbench"]["error"] or "Model" in by["c_not_kernelbench"]["error"]
    assert fp["fast_0"] == pytest.approx(1 / 3) and fp["fast_1"] is None and solved_share(rows) is None
    # the run went into the same history, with its candidates
    run = history.run(by["a_swish_add"]["run_id"])
    assert run["status"] == "done" and len(history.candidates(run["id"])) >= 1
    page = render_suite_report(history, suite_id)
    assert "<svg" in page and "fast_0 33%" in page


def test_fast_p_against_hand_counts():
    rows = [{"correct": True, "speedup_eager": 0.5}, {"correct": True, "speedup_eager": 1.2},
            {"correct": True, "speedup_eager": 2.5}, {"correct": False, "speedup_eager": None}]
    assert fast_p(rows) == {"fast_0": 0.75, "fast_0.8": 0.5, "fast_1": 0.5, "fast_1.5": 0.25, "fast_2": 0.25}
    assert solved_share(rows) == 0.5


def test_suite_resumes_where_it_stopped(suite_dir, history):
    from argus_agent.suite import run_task

    first = {"name": "b_raises", "source": RAISES, "target": "cpu", "budget": 2, "seed": 0}
    done = run_task(first)["row"]
    # an interrupted suite with one problem done: same problems, target, budget and seed
    suite_id, rows, _ = run_suite(suite_dir, "cpu", 2, history=history)
    history.db.execute("DELETE FROM suite_problems WHERE suite_id = ? AND name != 'b_raises'", (suite_id,))
    history.db.execute("UPDATE suite_problems SET error = 'from before' WHERE suite_id = ?", (suite_id,))
    history.db.execute("UPDATE suites SET status = 'running' WHERE id = ?", (suite_id,))
    history.db.commit()
    again, rows, _ = run_suite(suite_dir, "cpu", 2, history=history)
    assert again == suite_id and len(rows) == 3
    assert next(r for r in rows if r["name"] == "b_raises")["error"] == "from before"   # not run again
    assert "no inputs today" in done["error"]


def test_worker_processes_merge_into_one_history(suite_dir, history):
    (suite_dir / "c_not_kernelbench.py").unlink()
    suite_id, rows, _ = run_suite(suite_dir, "cpu", 2, history=history, workers=2, resume=False)
    assert len(rows) == 2 and all(r["worker"].startswith("worker pid") for r in rows)
    assert next(r for r in rows if r["name"] == "a_swish_add")["correct"]
    assert len(history.runs()) >= 1


def test_suite_on_a_local_ray_instance(suite_dir, history):
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'argus-agent[cluster]')")
    try:
        suite_id, rows, _ = run_suite(suite_dir, "cpu", 2, history=history, ray_address="local", resume=False)
    finally:
        ray.shutdown()
    assert len(rows) == 3 and all(r["worker"].startswith("ray node") for r in rows if r["correct"])
    assert next(r for r in rows if r["name"] == "a_swish_add")["correct"]


def test_cli_suite_json_and_report(suite_dir, tmp_path):
    db = tmp_path / "s.db"
    r = CliRunner().invoke(main, ["suite", str(suite_dir), "--budget", "2", "--json", "--db", str(db)])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout[r.stdout.index("{"):])
    assert [p["name"] for p in data["problems"]] == ["a_swish_add", "b_raises", "c_not_kernelbench"]
    assert set(data["problems"][0]) == {"name", "correct", "speedup_eager", "speedup_compile", "precision", "error"}
    assert set(data["fast_p"]) == {"fast_0", "fast_0.8", "fast_1", "fast_1.5", "fast_2"}
    page = tmp_path / "suite.html"
    r = CliRunner().invoke(main, ["report", str(data["suite_id"]), "--suite", "--db", str(db), "--out", str(page)])
    assert r.exit_code == 0 and "speedup" in page.read_text()
