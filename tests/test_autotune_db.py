"""The trials database under the driver: SIGKILL at random points 20 times, then --resume, and no
trial is lost, stored twice or repeated; the budget counts the stored trials across resumes.

The loop runs in a child process on a synthetic space and runner (no torch: each start takes a
fraction of a second), with the real driver, strategy and database."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from profiler.autotune.db import Study, Trial, TrialDB
from profiler.autotune.loop import tune
from profiler.autotune.runner import TrialResult
from profiler.autotune.space import Dimension, Space
from profiler.autotune.strategy import RandomStrategy

ROOT = Path(__file__).resolve().parents[1]
BUDGET = 40
SPACE = Space(
    (
        Dimension("tile:a", "tile", ((("m", 32),), (("m", 64),), (("m", 128),), (("m", 256),)), ("a",)),
        Dimension("fusion:b", "fusion", ("fused", "split"), ("b",)),
        Dimension("tile:c", "tile", ((("n", 8),), (("n", 16),), (("n", 32),), (("n", 64),), (("n", 128),)), ("c",)),
    ),
    "bf16",
    "synthetic",
    "edge-npu",
)  # 4 x 2 x 5 = 40 points: the budget takes every one

CHILD = """
import sys, time, json
from profiler.autotune.db import Study, TrialDB
from profiler.autotune.loop import tune
from profiler.autotune.runner import TrialResult
from profiler.autotune.space import Space
from profiler.autotune.strategy import RandomStrategy

space = Space.from_dict(json.load(open(sys.argv[1])))
log = open(sys.argv[3], "a")

class Slow:
    name, hardware = "simulator", "edge-npu"
    def run(self, c):
        log.write(c.hash + "\\n"); log.flush()
        time.sleep(0.02)
        return TrialResult(1000 + int(c.hash[:4], 16), "", 0.0, {"total_ns": 1})

db = TrialDB(sys.argv[2])
tune(space, Slow(), RandomStrategy(space, 7), db, Study("w", "edge-npu", "simulator", "synthetic"), int(sys.argv[4]), 7)
"""


def _rows(path: Path) -> list[tuple]:
    if not path.exists():
        return []
    with sqlite3.connect(path) as conn:
        try:
            return conn.execute("SELECT seq, candidate_hash, time_ns FROM trials ORDER BY seq").fetchall()
        except sqlite3.OperationalError:  # killed before the tables were made
            return []


def _lines(log: Path) -> int:
    """Trials started so far (the child writes a line as each begins)."""
    return log.read_text().count("\n") if log.exists() else 0


def _child(tmp: Path, db: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, str(tmp / "child.py"), str(tmp / "space.json"), str(db), str(log), str(BUDGET)],
        env=env,
        cwd=ROOT,
    )


def test_sigkill_twenty_times_loses_and_repeats_nothing(tmp_path):
    (tmp_path / "child.py").write_text(CHILD)
    (tmp_path / "space.json").write_text(json.dumps(SPACE.to_dict()))
    reference_db, reference_log = tmp_path / "ref.sqlite", tmp_path / "ref.log"
    assert _child(tmp_path, reference_db, reference_log).wait(60) == 0
    reference = _rows(reference_db)
    assert len(reference) == BUDGET and [r[0] for r in reference] == list(range(BUDGET))

    db, log = tmp_path / "t.sqlite", tmp_path / "t.log"
    rng = random.Random(14)
    before: list[tuple] = []
    kills = 0
    while kills < 20:
        p = _child(tmp_path, db, log)
        # each life runs 1-3 trials, then dies at a random point of the next one (its 20 ms run, its
        # commit, or between): the kills follow the loop's progress, not the machine's speed (a
        # fixed sleep let a fast start finish the study in 4 lives)
        seen = _lines(log) + rng.randint(1, 3)
        deadline = time.monotonic() + 60
        while _lines(log) < seen and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(rng.uniform(0.0, 0.03))
        if p.poll() is not None:  # finished before the kill: the study is complete
            break
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        kills += 1
        after = _rows(db)
        assert after[: len(before)] == before, "a stored trial changed or vanished"
        assert [r[0] for r in after] == list(range(len(after))), "a gap or a repeat in seq"
        before = after
    assert kills >= 5  # the loop was really interrupted, more than a few times
    assert _child(tmp_path, db, log).wait(60) == 0  # --resume to the end
    final = _rows(db)
    # the same trials in the same order as the run never killed: nothing lost, nothing twice
    assert final == reference
    runs = log.read_text().split()
    # a trial runs again only when the kill fell between its run and its commit: at most once per kill
    assert len(runs) - BUDGET <= kills
    assert set(runs) == {r[1] for r in final}


class Counting:
    name, hardware = "simulator", "edge-npu"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def run(self, c):  # type: ignore[no-untyped-def]
        self.calls.append(c.hash)
        ok = c.get("fusion:b") != "split"
        return TrialResult(5000 + len(c.choices) if ok else None, "" if ok else "functional check: wrong", 0.0, {})


def test_budget_counts_stored_trials_across_resumes_and_failures_are_stored(tmp_path):
    study = Study("w", "edge-npu", "simulator", "synthetic")
    db = TrialDB(tmp_path / "t.sqlite")
    first = Counting()
    tune(SPACE, first, RandomStrategy(SPACE, 3), db, study, 6, 3)
    assert db.count(study) == 6 and len(first.calls) == 6
    again = Counting()
    trials = tune(SPACE, again, RandomStrategy(SPACE, 3), db, study, 10, 3)
    # the replayed strategy proposes the 6 stored trials first: only 4 new ones run
    assert len(again.calls) == 4 and not set(again.calls) & set(first.calls)
    assert len(trials) == 10 and [t.seq for t in trials] == list(range(10))
    failed = [t for t in trials if t.failure]
    assert failed and all(t.time_ns is None and t.candidate["fusion:b"] == "split" for t in failed)
    assert all(t.time_ns is not None for t in trials if t.candidate.get("fusion:b") != "split")
    db.close()


def test_a_trial_is_stored_once(tmp_path):
    study = Study("w", "edge-npu", "simulator", "synthetic")
    db = TrialDB(tmp_path / "t.sqlite")
    t = Trial("h", 0, "random", {}, 1, "", 0.0, "", {}, 0.1)
    db.add(study, t, 0)
    try:
        db.add(study, t, 0)
    except sqlite3.IntegrityError:
        pass
    else:
        raise AssertionError("a second row for the same candidate was stored")
    assert db.count(study) == 1
    # another study (another workload) holds its own row for the same candidate
    db.add(Study("w2", "edge-npu", "simulator", "synthetic"), t, 0)
    assert db.count(study) == 1


def test_not_a_database_is_one_input_error(tmp_path):
    from profiler.model.errors import InputError

    bad = tmp_path / "notes.sqlite"
    bad.write_text("these are my notes, not SQLite\n" * 50)
    try:
        TrialDB(bad)
    except InputError as e:
        assert "not a trials database" in e.problem
    else:
        raise AssertionError("no InputError")
    assert bad.read_text().startswith("these are my notes")  # nothing the user gave is modified
