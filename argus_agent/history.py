"""Run history in SQLite: every run and every candidate (source, verdict, counterexamples, test results,
timings, speedup), plus ablations of a run's best kernel. The database lives at `$ARGUS_HOME/history.db`
(default `~/.argus`); `--db` overrides it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    problem TEXT, problem_path TEXT, problem_digest TEXT, target TEXT, budget INTEGER, planner TEXT,
    seed INTEGER, status TEXT, started REAL, finished REAL, best_candidate INTEGER, config TEXT, summary TEXT
);
CREATE TABLE IF NOT EXISTS candidates (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER REFERENCES runs(id), iteration INTEGER, parent INTEGER, action TEXT, source TEXT,
    verdict TEXT, findings TEXT, error TEXT, correct INTEGER, evaluation TEXT, speedup REAL, reward REAL,
    created REAL
);
CREATE TABLE IF NOT EXISTS ablations (
    run_id INTEGER REFERENCES runs(id), removed TEXT, correct INTEGER, speedup REAL, note TEXT
);
"""


def default_db() -> Path:
    home = Path(os.environ.get("ARGUS_HOME", Path.home() / ".argus"))
    return home / "history.db"


class History:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else default_db()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(self.path))
        self.db.row_factory = sqlite3.Row
        self.db.executescript(SCHEMA)

    def close(self):
        self.db.close()

    # ------------------------------------------------------------------ runs
    def start_run(self, problem: str, problem_path: str, digest: str, target: str, budget: int, planner: str,
                  seed: int, config: dict) -> int:
        cur = self.db.execute(
            "INSERT INTO runs (problem, problem_path, problem_digest, target, budget, planner, seed, status, "
            "started, config) VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?, ?)",
            (problem, problem_path, digest, target, budget, planner, seed, time.time(), json.dumps(config)))
        self.db.commit()
        return cur.lastrowid

    def find_unfinished(self, digest: str, target: str, planner: str, seed: int, config: dict) -> int | None:
        row = self.db.execute(
            "SELECT id FROM runs WHERE problem_digest = ? AND target = ? AND planner = ? AND seed = ? AND "
            "config = ? AND status = 'running' ORDER BY id DESC LIMIT 1",
            (digest, target, planner, seed, json.dumps(config))).fetchone()
        return row["id"] if row else None

    def finish_run(self, run_id: int, status: str, best: int | None, summary: dict):
        self.db.execute("UPDATE runs SET status = ?, finished = ?, best_candidate = ?, summary = ? WHERE id = ?",
                        (status, time.time(), best, json.dumps(summary), run_id))
        self.db.commit()

    def run(self, run_id: int) -> dict | None:
        row = self.db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            return None
        d = dict(row)
        d["config"] = json.loads(d["config"] or "{}")
        d["summary"] = json.loads(d["summary"] or "{}")
        return d

    def runs(self, limit: int = 50) -> list[dict]:
        rows = self.db.execute("SELECT r.*, (SELECT COUNT(*) FROM candidates c WHERE c.run_id = r.id) AS n "
                               "FROM runs r ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        return [dict(r) for r in rows]

    # ------------------------------------------------------------------ candidates
    def add_candidate(self, run_id: int, iteration: int, parent: int | None, action: dict, source: str,
                      verdict: dict, error: str, correct: bool, evaluation: dict | None, speedup: float | None,
                      reward: float) -> int:
        cur = self.db.execute(
            "INSERT INTO candidates (run_id, iteration, parent, action, source, verdict, findings, error, correct, "
            "evaluation, speedup, reward, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (run_id, iteration, parent, json.dumps(action), source, verdict.get("status", ""),
             json.dumps(verdict), error, int(bool(correct)), json.dumps(evaluation or {}), speedup, reward,
             time.time()))
        self.db.commit()
        return cur.lastrowid

    def candidates(self, run_id: int) -> list[dict]:
        rows = self.db.execute("SELECT * FROM candidates WHERE run_id = ? ORDER BY iteration, id",
                               (run_id,)).fetchall()
        out = []
        for r in rows:
            d = dict(r)
            d["action"] = json.loads(d["action"])
            d["findings"] = json.loads(d["findings"] or "{}")
            d["evaluation"] = json.loads(d["evaluation"] or "{}")
            out.append(d)
        return out

    def candidate(self, cand_id: int) -> dict | None:
        return next((c for c in self.candidates_by_id([cand_id])), None)

    def candidates_by_id(self, ids):
        for i in ids:
            row = self.db.execute("SELECT run_id FROM candidates WHERE id = ?", (i,)).fetchone()
            if row:
                yield next(c for c in self.candidates(row["run_id"]) if c["id"] == i)

    # ------------------------------------------------------------------ ablations
    def set_ablations(self, run_id: int, rows: list[dict]):
        self.db.execute("DELETE FROM ablations WHERE run_id = ?", (run_id,))
        self.db.executemany("INSERT INTO ablations VALUES (?, ?, ?, ?, ?)",
                            [(run_id, r["removed"], int(r["correct"]), r.get("speedup"), r.get("note", ""))
                             for r in rows])
        self.db.commit()

    def ablations(self, run_id: int) -> list[dict]:
        return [dict(r) for r in self.db.execute("SELECT * FROM ablations WHERE run_id = ?", (run_id,))]
