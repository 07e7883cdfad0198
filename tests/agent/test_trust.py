"""Honest bookkeeping: a hostile LLM gets no dishonest model_new.py out, iteration numbers everywhere, the
history as a store (schema migration, locks, interrupted runs), --out guarded, the LLM endpoint's replies of
any shape and its outages, the ablation's cost and the offline planner's stopping."""

import json
import socket
import sqlite3
import time
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from argus_agent.cli import main
from argus_agent.history import History, RunBusy
from argus_agent.loop import ablate, optimize
from argus_agent.outdir import OutDirError, backup_outputs, check_out_dir
from argus_agent.planner import LLMPlanner, OfflinePlanner, Step, content_text, digest

from .test_sandbox import FORWARD, HONEST, ZEROS


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_a_hostile_llm_gets_no_dishonest_kernel_out(fake_openai, history, examples, tmp_path):
    patched = ZEROS + FORWARD + "\ntorch.allclose = lambda *a, **k: True\n"
    disabled = ZEROS + FORWARD.replace("    return out\n", "    with torch._C.DisableTorchFunction():\n"
                                       "        return x * torch.sigmoid(x) + y\n")
    loops = HONEST + FORWARD + "\nwhile True:\n    pass\n"
    server = fake_openai([json.dumps({"kind": "edit", "source": s}) for s in (patched, disabled, loops)])
    planner = LLMPlanner(server.base_url, "hostile", api_key="k", timeout=10)
    t0 = time.monotonic()
    result = optimize(examples["swish_add"], budget=5, planner=planner, history=history, out_dir=tmp_path / "out",
                      stage_timeout={"build": 4})
    assert time.monotonic() - t0 < 120
    outcomes = [s.outcome for s in result.steps]
    assert outcomes[:4] == ["correct", "forbidden", "forbidden", "timeout"], outcomes
    assert result.best_candidate == 0 and result.status == "done"
    shipped = (tmp_path / "out" / "model_new.py").read_text()
    assert "allclose" not in shipped and "DisableTorchFunction" not in shipped and "while True" not in shipped


def test_iteration_numbers_everywhere(examples, tmp_path):
    db, out = tmp_path / "h.db", tmp_path / "out"
    run("optimize", examples["swish_add"], "--budget", 2, "--db", db, "--json", "--no-resume")  # rows 1..2
    r = run("optimize", examples["swish_add"], "--budget", 3, "--out", out, "--db", db, "--json", "--no-resume")
    data = json.loads(r.stdout[r.stdout.index("{"):])
    n = data["best_candidate"]
    assert data["steps"][n]["iteration"] == n and data["steps"][n]["outcome"] == "correct"
    assert json.loads((out / "summary.json").read_text())["best_candidate"] == n
    listed = json.loads(run("history", "--db", db, "--json").stdout)
    assert listed[0]["best_candidate"] == n
    assert f"#{n}" in run("history", "--db", db).stdout.splitlines()[1]
    page = tmp_path / "r.html"
    run("report", data["run_id"], "--db", db, "--out", page)
    assert f"best candidate #{n};" in page.read_text()
    assert History(db).candidates(data["run_id"])[n]["id"] != n   # the row id is not what is shown


V1_SCHEMA = """
CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, problem TEXT, problem_path TEXT, problem_digest TEXT,
  target TEXT, budget INTEGER, planner TEXT, seed INTEGER, status TEXT, started REAL, finished REAL,
  best_candidate INTEGER, config TEXT, summary TEXT);
CREATE TABLE candidates (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id INTEGER, iteration INTEGER, parent INTEGER,
  action TEXT, source TEXT, verdict TEXT, findings TEXT, error TEXT, correct INTEGER, evaluation TEXT,
  speedup REAL, reward REAL, created REAL);
CREATE TABLE ablations (run_id INTEGER, removed TEXT, correct INTEGER, speedup REAL, note TEXT);
INSERT INTO candidates (id, run_id, iteration) VALUES (7, 1, 0), (9, 1, 1);
INSERT INTO runs (id, problem, status, best_candidate, config, summary) VALUES (1, 'p', 'done', 9, '{}', '{}');
"""


def test_an_old_history_is_migrated(tmp_path):
    db = tmp_path / "old.db"
    con = sqlite3.connect(db)
    con.executescript(V1_SCHEMA)
    con.close()
    h = History(db)
    assert h.db.execute("PRAGMA user_version").fetchone()[0] == 2
    assert h.run(1)["best_candidate"] == 1              # the row id 9 became iteration 1
    assert h.suites() == []                             # the new tables exist
    h.close()
    h = History(db)                                     # and a second open changes nothing
    assert h.run(1)["best_candidate"] == 1


def test_live_runs_are_locked_and_dead_ones_interrupted(tmp_path):
    db = tmp_path / "h.db"
    key = ("d", "cpu", "offline", 0, {"budget": 2})
    a = History(db)
    run_id = a.start_run("p", "p.py", *key[:2], 2, *key[2:4], key[4])
    b = History(db)
    assert b.run(run_id)["status"] == "running"         # a holds its lock
    with pytest.raises(RunBusy, match=f"run {run_id}"):
        b.find_unfinished(*key)
    a.close()                                           # the process "dies" without finishing
    assert b.run(run_id)["status"] == "interrupted"
    assert b.find_unfinished(*key) == run_id            # the same command resumes it
    assert History(db).run(run_id)["status"] == "running"


def test_out_refuses_another_problem_and_keeps_a_backup(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "model_new.py").write_text("old")
    (out / "summary.json").write_text(json.dumps({"problem": "a", "problem_digest": "aaa", "problem_path": "a.py"}))
    b = SimpleNamespace(name="b", digest="bbb", path=tmp_path / "b.py")
    with pytest.raises(OutDirError, match="'a'.*--force"):
        check_out_dir(out, b)
    check_out_dir(out, b, force=True)
    check_out_dir(out, SimpleNamespace(name="a", digest="aaa", path=tmp_path / "a.py"))  # the same problem: fine
    kept = backup_outputs(out)
    assert (kept / "model_new.py").read_text() == "old" and not (out / "model_new.py").exists()
    assert kept.parent == out / ".argus-backup"


def test_cli_out_of_another_problem_exits_2(examples, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text(json.dumps({"problem": "other", "problem_digest": "x"}))
    r = run("optimize", examples["swish_add"], "--budget", 1, "--out", out, "--db", tmp_path / "h.db")
    assert r.exit_code == 2 and "'other'" in r.output and "--force" in r.output


@pytest.mark.parametrize("content, text", [
    ("plain", "plain"), (None, ""), (42, "42"), (3.5, "3.5"),
    ([{"type": "text", "text": '{"kind": '}, {"type": "text", "text": '"stop"}'}], '{"kind": "stop"}'),
    (["a", {"text": "b"}], "ab"),
])
def test_content_of_any_shape(content, text):
    assert content_text(content) == text


def test_llm_replies_of_any_shape_do_not_crash(fake_openai, history, examples):
    server = fake_openai([{"hold": 0, "content": 42}, {"hold": 0, "content": None},
                          {"hold": 0, "content": [{"type": "text", "text": '{"kind": "stop"}'}]}])
    planner = LLMPlanner(server.base_url, "m", api_key="k", timeout=10)
    result = optimize(examples["swish_add"], budget=6, planner=planner, history=history)
    assert [s.outcome for s in result.steps][1:] == ["malformed-reply", "malformed-reply"]
    assert result.status == "done" and len(server.requests) == 3


def test_an_unreachable_endpoint_stops_the_run(examples, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]   # closed again: nothing listens there
    r = run("optimize", examples["swish_add"], "--budget", 20, "--db", tmp_path / "h.db", "--llm-base-url",
            f"http://127.0.0.1:{port}/v1", "--model", "m", "--api-key", "k", "--llm-max-failures", 2)
    assert r.exit_code == 4 and "could not be reached 2 times in a row" in r.output
    runs = History(tmp_path / "h.db").runs()
    assert runs[0]["status"] == "aborted" and runs[0]["n"] == 3   # the template and two failures


def test_ablation_costs_one_evaluation_per_skill(examples, monkeypatch):
    from argus_agent.kb import load_kb

    kb = load_kb()
    skill = next(iter(kb.skills))
    other = list(kb.skills)[1]
    chain = [{"id": 10, "parent": None, "iteration": 0, "action": {"kind": "template"}, "source": "s0"}]
    for i, name in enumerate([skill, other, skill, skill, other], start=1):
        chain.append({"id": 10 + i, "parent": 9 + i, "iteration": i, "source": f"s{i}",
                      "action": {"kind": "skill", "skill": name, "variant": 0}})
    calls = []
    session = SimpleNamespace(check=lambda src: calls.append(src) or SimpleNamespace(
        correct=True, evaluation=None, message="ok"))
    progress = []
    rows = ablate(session, chain, 15, lambda i, n, row: progress.append((i, n)))
    assert len(calls) == 2 and progress == [(1, 2), (2, 2)]
    assert [r["removed"] for r in rows] == [f"{skill} (#1, #3, #4)", f"{other} (#2, #5)"]
    assert calls[0] == "s0" and calls[1] == "s1"        # replayed from the source before the first use


def test_offline_planner_stops_and_never_replays():
    planner = OfflinePlanner(seed=0, patience=3)
    ctx = SimpleNamespace(kernel_source="k", skills=[], iteration=1)
    planner.observe(Step(0, {"kind": "template"}, "correct", source_digest=""))
    planner.observe(Step(1, {"kind": "tune"}, "correct", source_digest=digest("k")))
    assert planner.propose(ctx)["kind"] == "stop"   # the tuner, the only arm, was played on this source
    for i in range(3):
        planner.observe(Step(2 + i, {"kind": "skill", "skill": "x", "variant": i}, "correct", source_digest="z"))
    stop = planner.propose(SimpleNamespace(kernel_source="new", skills=[], iteration=5))
    assert stop["kind"] == "stop" and stop["reason"].startswith("no improvement in the last")
