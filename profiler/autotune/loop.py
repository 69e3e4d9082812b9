"""The driver: ask the strategy, run what is not stored yet, store it (the only writer of the
database), tell the strategy, until the study holds `budget` trials (the baseline included,
across resumes) or the strategy has nothing left.

Resume: the strategy is replayed from the start with the same seed; a proposal already stored
for the study is told its stored result without running again, so a killed run continues where
it stopped and no finished trial is repeated (or stored twice: the primary key)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from profiler.autotune.db import Study, Trial, TrialDB
from profiler.autotune.space import Space
from profiler.autotune.strategy import Strategy

Progress = Callable[[Trial, int, "Trial | None", float, str], None]  # trial, stored, best, elapsed s, finding


def tune(
    space: Space,
    runner: Any,
    strategy: Strategy,
    db: TrialDB,
    study: Study,
    budget: int,
    seed: int | None = None,
    progress: Progress | None = None,
) -> list[Trial]:
    """Run the loop (module docstring); returns the study's trials in the order stored."""
    db.start_study(study, space.to_dict())
    t0 = time.perf_counter()
    best = _best(db.trials(study))
    replayed = 0
    while db.count(study) < budget:
        p = strategy.propose()
        if p is None:
            break
        h = p.candidate.hash
        trial = db.get(study, h)
        if trial is None:
            start = time.perf_counter()
            r = runner.run(p.candidate)
            trial = Trial(
                h,
                db.count(study),
                strategy.name,
                p.candidate.to_json(),
                r.time_ns,
                r.failure,
                r.accuracy_error,
                p.finding,
                r.summary,
                round(time.perf_counter() - start, 4),
            )
            db.add(study, trial, seed)
            if trial.ok and (best is None or trial.time_ns < best.time_ns):  # type: ignore[operator]
                best = trial
            if progress is not None:
                progress(trial, db.count(study), best, time.perf_counter() - t0, p.finding)
        else:
            replayed += 1
            if replayed > 100 * max(budget, 1):  # a strategy proposing stored trials forever
                break
        strategy.observe(p.candidate, trial)
    return db.trials(study)


def _best(trials: list[Trial]) -> Trial | None:
    ok = [t for t in trials if t.ok]
    return min(ok, key=lambda t: (t.time_ns, t.seq)) if ok else None


def best_trial(trials: list[Trial]) -> Trial | None:
    """The fastest trial that passed its check (the earliest of equal ones)."""
    return _best(trials)


def front(trials: list[Trial]) -> list[Trial]:
    """The speed/accuracy front: accepted trials no other beats on both time and error."""
    ok = sorted((t for t in trials if t.ok), key=lambda t: (t.time_ns, t.accuracy_error or 0.0))
    out: list[Trial] = []
    for t in ok:
        if not out or (t.accuracy_error or 0.0) < (out[-1].accuracy_error or 0.0):
            out.append(t)
    return out
