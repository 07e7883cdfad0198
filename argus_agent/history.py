"""Run history in SQLite: every run and every candidate (source, verdict, counterexamples, test results,
timings, speedup), ablations of a run's best kernel, and suites (one row per problem of an `argus suite`).
The database lives at `$ARGUS_HOME/history.db` (default `~/.argus`); `--db` overrides it.

The schema has a version (`PRAGMA user_version`); opening an older database migrates it in place, one step
at a time (`MIGRATIONS`). A run in progress holds a lock file (`locks/run-<id>.lock` beside the database,
`fcntl.flock`: the OS drops it when the process dies), so a run marked `running` whose lock is free was
interrupted (a crash, a kill): it reads as `interrupted` and the next identical command resumes it, while a
second identical command started during a live run is refused instead of joining it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path

SCHEMA_VERSION = 2
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


def _v2(db):
    """runs.best_candidate holds the best candidate's iteration (it held the candidates row id), plus suites."""
    db.execute("UPDATE runs SET best_candidate = (SELECT c.iteration FROM candidates c WHERE c.id = "
               "runs.best_candidate) WHERE best_candidate IS NOT NULL")
    db.executescript("""
CREATE TABLE IF NOT EXISTS suites (
    id INTEGER PRIMARY KEY AUTOINCREMENT, directory TEXT, key TEXT, target TEXT, budget INTEGER, config TEXT,
    status TEXT, started REAL, finished REAL
);
CREATE TABLE IF NOT EXISTS suite_problems (
    suite_id INTEGER REFERENCES suites(id), name TEXT, path TEXT, digest TEXT, run_id INTEGER, correct INTEGER,
    speedup_eager REAL, speedup_compile REAL, precision TEXT, error TEXT, seconds REAL, worker TEXT,
    PRIMARY KEY (suite_id, name)
);
""")


MIGRATIONS = {2: _v2}   # version -> the step from version - 1


class RunBusy(Exception):
    """An identical run is in progress (its lock is held)."""

    def __init__(self, run_id: int):
        self.run_id = run_id
        super().__init__(f"run {run_id} of this problem, target, planner, seed and budget is in progress (another "
                         "argus process holds its lock); wait for it, or pass --no-resume to start a separate run")


def default_home() -> Path:
    return Path(os.environ.get("ARGUS_HOME") or Path.home() / ".argus")


def default_db() -> Path:
    return default_home() / "history.db"


class History:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else default_db()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(self.path), timeout=60)   # suite workers write concurrently
        self.db.row_factory = sqlite3.Row
        self.locks: dict = {}
        self.migrate()

    def migrate(self):
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise RuntimeError(f"{self.path}: history schema version {version} is newer than this argus "
                               f"({SCHEMA_VERSION}); upgrade argus-agent")
        with self.db:
            self.db.executescript(SCHEMA)
            for v in range(max(version, 1) + 1, SCHEMA_VERSION + 1):
                MIGRATIONS[v](self.db)
            self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self):
        for fd in self.locks.values():
            os.close(fd)
        self.locks.clear()
        self.db.close()

    # ------------------------------------------------------------------ locks
    def _lock_path(self, name: str) -> Path:
        d = self.path.parent / "locks"
        d.mkdir(parents=True, exist_ok=True)
        return d / f"{name}.lock"

    def try_lock(self, name: str) -> bool:
        """Take the lock `name` for as long as this History is open (False if another process holds it)."""
        if name in self.locks:
            return True
        fd = os.open(self._lock_path(name), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.locks[name] = fd
        return True

    def unlock(self, name: str):
        fd = self.locks.pop(name, None)
        if fd is not None:
            os.close(fd)

    def is_live(self, run_id: int) -> bool:
        """Whether some process (this one included) holds run `run_id`'s lock."""
        name = f"run-{run_id}"
        if name in self.locks:
            return True
        if self.try_lock(name):
            self.unlock(name)
            return False
        return True

    @contextlib.contextmanager
    def key_lock(self, key: str):
        """A short exclusive section for one run key (find-or-start must not race)."""
        name = "key-" + hashlib.sha256(key.encode()).hexdigest()[:16]
        fd = os.open(self._lock_path(name), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ runs
    def start_run(self, problem: str, problem_path: str, digest: str, target: str, budget: int, planner: str,
                  seed: int, config: dict) -> int:
        cur = self.db.execute(
            "INSERT INTO runs (problem, problem_path, problem_digest, target, budget, planner, seed, status, "
            "started, config) VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?, ?)",
            (problem, problem_path, digest, target, budget, planner, seed, time.time(), json.dumps(config)))
        self.db.commit()
        self.lock_run(cur.lastrowid)
        return cur.lastrowid

    def find_unfinished(self, digest: str, target: str, planner: str, seed: int, config: dict) -> int | None:
        """The newest interrupted run with this key, or None. Raises RunBusy when the only unfinished runs
        with this key are live."""
        rows = self.db.execute(
            "SELECT id FROM runs WHERE problem_digest = ? AND target = ? AND planner = ? AND seed = ? AND "
            "config = ? AND status IN ('running', 'interrupted') ORDER BY id DESC",
            (digest, target, planner, seed, json.dumps(config))).fetchall()
        live = None
        for r in rows:
            if self.try_lock(f"run-{r['id']}"):
                return r["id"]
            live = live or r["id"]
        if live is not None:
            raise RunBusy(live)
        return None

    def lock_run(self, run_id: int):
        self.try_lock(f"run-{run_id}")

    def finish_run(self, run_id: int, status: str, best: int | None, summary: dict):
        """`best` is the best candidate's iteration."""
        self.db.execute("UPDATE runs SET status = ?, finished = ?, best_candidate = ?, summary = ? WHERE id = ?",
                        (status, time.time(), best, json.dumps(summary), run_id))
        self.db.commit()
        self.unlock(f"run-{run_id}")

    def mark_interrupted(self, run_id: int, why: str = ""):
        self.db.execute("UPDATE runs SET status = 'interrupted', finished = ?, summary = ? WHERE id = ?",
                        (time.time(), json.dumps({"interrupted": why}), run_id))
        self.db.commit()
        self.unlock(f"run-{run_id}")

    def _status(self, d: dict) -> dict:
        if d.get("status") == "running" and not self.is_live(d["id"]):
            d["status"] = "interrupted"   # its process is gone without finishing it
        return d

    def run(self, run_id: int) -> dict | None:
        row = self.db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            return None
        d = dict(row)
        d["config"] = json.loads(d["config"] or "{}")
        d["summary"] = json.loads(d["summary"] or "{}")
        return self._status(d)

    def runs(self, limit: int = 50) -> list[dict]:
        rows = self.db.execute("SELECT r.*, (SELECT COUNT(*) FROM candidates c WHERE c.run_id = r.id) AS n "
                               "FROM runs r ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        return [self._status(dict(r)) for r in rows]

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

    # ------------------------------------------------------------------ suites
    def start_suite(self, directory: str, key: str, target: str, budget: int, config: dict,
                    resume: bool = True) -> tuple[int, bool]:
        """(suite id, resumed): the newest unfinished suite with this key when resuming, else a new one."""
        if resume:
            row = self.db.execute("SELECT id FROM suites WHERE key = ? AND status != 'done' ORDER BY id DESC "
                                  "LIMIT 1", (key,)).fetchone()
            if row:
                return row["id"], True
        cur = self.db.execute("INSERT INTO suites (directory, key, target, budget, config, status, started) "
                              "VALUES (?, ?, ?, ?, ?, 'running', ?)",
                              (directory, key, target, budget, json.dumps(config), time.time()))
        self.db.commit()
        return cur.lastrowid, False

    def finish_suite(self, suite_id: int, status: str = "done"):
        self.db.execute("UPDATE suites SET status = ?, finished = ? WHERE id = ?", (status, time.time(), suite_id))
        self.db.commit()

    def add_suite_problem(self, suite_id: int, row: dict):
        self.db.execute(
            "INSERT OR REPLACE INTO suite_problems (suite_id, name, path, digest, run_id, correct, speedup_eager, "
            "speedup_compile, precision, error, seconds, worker) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (suite_id, row["name"], row.get("path"), row.get("digest"), row.get("run_id"),
             None if row.get("correct") is None else int(bool(row["correct"])), row.get("speedup_eager"),
             row.get("speedup_compile"), row.get("precision"), row.get("error"), row.get("seconds"),
             row.get("worker")))
        self.db.commit()

    def suite_problems(self, suite_id: int) -> list[dict]:
        rows = self.db.execute("SELECT * FROM suite_problems WHERE suite_id = ? ORDER BY name", (suite_id,))
        out = []
        for r in rows:
            d = dict(r)
            d["correct"] = None if d["correct"] is None else bool(d["correct"])
            out.append(d)
        return out

    def suite(self, suite_id: int) -> dict | None:
        row = self.db.execute("SELECT * FROM suites WHERE id = ?", (suite_id,)).fetchone()
        if row is None:
            return None
        d = dict(row)
        d["config"] = json.loads(d["config"] or "{}")
        return d

    def suites(self, limit: int = 50) -> list[dict]:
        return [dict(r) for r in self.db.execute("SELECT * FROM suites ORDER BY id DESC LIMIT ?", (limit,))]
