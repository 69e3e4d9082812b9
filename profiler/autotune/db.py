"""The trials database (SQLite), written only by the driver process (profiler/autotune/loop.py).

    trials: one row per (study, candidate_hash), a study being (workload_hash, hardware, runner)
      candidate_hash  sha256 of the candidate's canonical JSON (profiler/autotune/space.py)
      workload_hash   sha256 of the decomposed program's MLIR, the preset and the policy
      hardware        the preset's name;  runner  simulator, ...
      seq             the order the study stored it in (0: the baseline)
      strategy, seed  what proposed it first;  model  the workload's name
      candidate       the candidate's canonical JSON (dimension -> option, defaults omitted)
      time_ns         the measured (simulated) time, NULL when the trial failed
      failure         why it failed (text), '' when it did not
      accuracy_error  the functional check's largest relative error (NULL when it did not run)
      finding         the analysis finding that proposed it (roofline strategy), else ''
      trace_summary   JSON: total_ns, by_limiter {limiter: ns}, kernels [per-kernel analysis]
      wall_s          seconds the trial took;  created_at  Unix time it was stored
    studies: (workload_hash, hardware, runner) -> model, space JSON, created_at

Each trial is one transaction: a SIGKILL leaves every committed trial whole and no partial one
(SQLite's rollback journal); the primary key stores a candidate at most once per study."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS trials (
    candidate_hash TEXT NOT NULL,
    workload_hash TEXT NOT NULL,
    hardware TEXT NOT NULL,
    runner TEXT NOT NULL,
    seq INTEGER NOT NULL,
    strategy TEXT NOT NULL,
    seed INTEGER,
    model TEXT NOT NULL,
    candidate TEXT NOT NULL,
    time_ns INTEGER,
    failure TEXT NOT NULL DEFAULT '',
    accuracy_error REAL,
    finding TEXT NOT NULL DEFAULT '',
    trace_summary TEXT NOT NULL DEFAULT '{}',
    wall_s REAL,
    created_at REAL NOT NULL,
    PRIMARY KEY (workload_hash, hardware, runner, candidate_hash)
);
CREATE TABLE IF NOT EXISTS studies (
    workload_hash TEXT NOT NULL,
    hardware TEXT NOT NULL,
    runner TEXT NOT NULL,
    model TEXT NOT NULL,
    space TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (workload_hash, hardware, runner)
);
"""


@dataclass(frozen=True)
class Study:
    workload_hash: str
    hardware: str
    runner: str
    model: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.workload_hash, self.hardware, self.runner)


@dataclass(frozen=True)
class Trial:
    """A stored trial (columns in the module docstring; candidate and trace_summary parsed)."""

    candidate_hash: str
    seq: int
    strategy: str
    candidate: dict[str, Any]
    time_ns: int | None
    failure: str
    accuracy_error: float | None
    finding: str
    trace_summary: dict[str, Any]
    wall_s: float | None

    @property
    def ok(self) -> bool:
        return self.time_ns is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "candidate_hash": self.candidate_hash,
            "seq": self.seq,
            "strategy": self.strategy,
            "candidate": self.candidate,
            "time_ns": self.time_ns,
            "failure": self.failure,
            "accuracy_error": self.accuracy_error,
            "finding": self.finding,
            "wall_s": self.wall_s,
        }


_COLUMNS = "candidate_hash, seq, strategy, candidate, time_ns, failure, accuracy_error, finding, trace_summary, wall_s"


class TrialDB:
    """The database at `path` (created with its tables when missing)."""

    def __init__(self, path: str | Path):
        from profiler.model.errors import InputError

        self.path = Path(path)
        try:
            self.conn = sqlite3.connect(self.path, isolation_level=None)  # explicit transactions
            self.conn.executescript(SCHEMA)
        except sqlite3.DatabaseError as e:
            raise InputError(self.path, f"not a trials database: {e}") from None

    @classmethod
    def read_only(cls, path: str | Path) -> TrialDB:
        """The database at `path` opened read-only (the dashboard reads it; nothing is created or
        changed): InputError when it is missing, not SQLite, or holds no trials tables."""
        from profiler.model.errors import InputError

        p = Path(path)
        if not p.is_file():
            raise InputError(p, "no such trials database")
        self = cls.__new__(cls)
        self.path = p
        try:
            self.conn = sqlite3.connect(f"{p.resolve().as_uri()}?mode=ro", uri=True)
            tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.DatabaseError as e:
            raise InputError(p, f"not a trials database: {e}") from None
        if not {"trials", "studies"} <= tables:
            self.conn.close()
            raise InputError(p, "not a trials database: no trials and studies tables (perf autotune --db writes them)")
        return self

    def studies(self) -> list[tuple[Study, dict[str, Any]]]:
        """Every study the database holds, in the order started, with its space (JSON)."""
        rows = self.conn.execute(
            "SELECT workload_hash, hardware, runner, model, space FROM studies ORDER BY created_at"
        ).fetchall()
        return [(Study(w, h, r, m), json.loads(space)) for w, h, r, m, space in rows]

    def close(self) -> None:
        self.conn.close()

    def has_study(self, s: Study) -> bool:
        row = self.conn.execute(
            "SELECT 1 FROM trials WHERE workload_hash=? AND hardware=? AND runner=? LIMIT 1", s.key
        ).fetchone()
        return row is not None

    def start_study(self, s: Study, space: dict[str, Any]) -> None:
        self.conn.execute(
            "INSERT OR IGNORE INTO studies VALUES (?, ?, ?, ?, ?, ?)",
            (*s.key, s.model, json.dumps(space, sort_keys=True), time.time()),
        )

    def count(self, s: Study) -> int:
        return int(
            self.conn.execute(
                "SELECT COUNT(*) FROM trials WHERE workload_hash=? AND hardware=? AND runner=?", s.key
            ).fetchone()[0]
        )

    def get(self, s: Study, candidate_hash: str) -> Trial | None:
        row = self.conn.execute(
            f"SELECT {_COLUMNS} FROM trials WHERE workload_hash=? AND hardware=? AND runner=? AND candidate_hash=?",
            (*s.key, candidate_hash),
        ).fetchone()
        return _trial(row) if row else None

    def trials(self, s: Study) -> list[Trial]:
        rows = self.conn.execute(
            f"SELECT {_COLUMNS} FROM trials WHERE workload_hash=? AND hardware=? AND runner=? ORDER BY seq", s.key
        ).fetchall()
        return [_trial(r) for r in rows]

    def add(self, s: Study, trial: Trial, seed: int | None) -> None:
        """Store one trial in its own transaction (sqlite3.IntegrityError if already stored)."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self.conn.execute(
                "INSERT INTO trials VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    trial.candidate_hash,
                    *s.key,
                    trial.seq,
                    trial.strategy,
                    seed,
                    s.model,
                    json.dumps(trial.candidate, sort_keys=True, separators=(",", ":")),
                    trial.time_ns,
                    trial.failure,
                    trial.accuracy_error,
                    trial.finding,
                    json.dumps(trial.trace_summary, sort_keys=True),
                    trial.wall_s,
                    time.time(),
                ),
            )
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")


def _trial(row: tuple) -> Trial:
    h, seq, strategy, cand, t, failure, err, finding, summary, wall = row
    return Trial(h, seq, strategy, json.loads(cand), t, failure, err, finding, json.loads(summary), wall)
