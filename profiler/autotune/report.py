"""What a study found: the best trial, the speed/accuracy front, and baseline vs tuned per
kernel with what changed and the analysis finding that led to it."""

from __future__ import annotations

from typing import Any

from profiler.autotune.db import Trial
from profiler.autotune.loop import best_trial, front
from profiler.autotune.space import Space


def _why(trials: list[Trial]) -> dict[str, str]:
    """dimension -> the finding of the trial that first improved the best with its option."""
    out: dict[str, str] = {}
    best: Trial | None = None
    for t in trials:
        if not t.ok:
            continue
        if best is None:
            best = t
            continue
        if t.time_ns < best.time_ns:  # type: ignore[operator]
            for name, option in t.candidate.items():
                if best.candidate.get(name) != option:
                    out[name] = t.finding
            best = t
    return out


def kernel_table(space: Space, trials: list[Trial]) -> list[dict[str, Any]]:
    """One row per kernel of the baseline or the best: name, baseline_ns, tuned_ns (None where
    the kernel is gone or new), speedup (baseline / tuned), changed (the best's choices that
    touch it), finding (why), sorted by time saved."""
    base = next((t for t in trials if t.seq == 0), None)
    best = best_trial(trials)
    if base is None or best is None:
        return []
    before = {r["name"]: r["time_ns"] for r in base.trace_summary.get("kernels", [])}
    after = {r["name"]: r["time_ns"] for r in best.trace_summary.get("kernels", [])}
    renamed = _renamed(base.trace_summary.get("kernels", []), best.trace_summary.get("kernels", []))
    after = {renamed.get(k, k): t for k, t in after.items()}
    why = _why(trials)
    touches: dict[str, list[str]] = {}
    names = list(dict.fromkeys([*before, *after]))
    for name, option in best.candidate.items():
        for k in _kernels(space, name, names) if name != "chips" else ():
            lever = name.split(":")[0] if not name.startswith("inductor:") else name.split(":", 1)[1]
            touches.setdefault(k, []).append(f"{lever}={_fmt(option)}")
    rows = []
    for k in names:
        b, a = before.get(k), after.get(k)
        changed = touches.get(k, [])
        dims = [n for n in best.candidate if k in _kernels(space, n, names)]
        rows.append(
            {
                "kernel": k,
                "baseline_ns": b,
                "tuned_ns": a,
                "speedup": (b / a) if b and a else None,
                "changed": ", ".join(changed),
                "finding": "; ".join(dict.fromkeys(why[n] for n in dims if why.get(n))),
            }
        )
    rows.sort(key=lambda r: -((r["baseline_ns"] or 0) - (r["tuned_ns"] or 0)))
    return rows


def _renamed(base: list[dict], best: list[dict]) -> dict[str, str]:
    """Tuned kernel -> the baseline kernel it replaces, for kernels whose name changed (an int8
    linear's kernel is named after its qmm): the baseline kernel gone from the tuned run that
    shares the most op names with it (ops keep their names through the passes)."""
    gone = {r["name"]: set(r.get("ops", ())) for r in base}
    names = {r["name"] for r in best}
    gone = {k: ops for k, ops in gone.items() if k not in names}
    out = {}
    for r in best:
        if r["name"] in {x["name"] for x in base}:
            continue
        ops = set(r.get("ops", ()))
        match = max(gone, key=lambda k: len(gone[k] & ops), default=None)
        if match is not None and gone[match] & ops:
            out[r["name"]] = match
            del gone[match]
    return out


def _kernels(space: Space, name: str, every: list[str]) -> tuple[str, ...] | list[str]:
    """The kernels dimension `name` changes: those it names, or `every` kernel when it names
    none (a whole-graph option: the Inductor runner's)."""
    try:
        return space.dimension(name).kernels or every
    except KeyError:
        return ()


def _fmt(option: Any) -> str:
    if isinstance(option, dict):
        return "x".join(f"{k}{v}" for k, v in option.items())
    return str(option)


def summary(space: Space, trials: list[Trial], plan: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON of `perf autotune --json`: trials, failed, best {candidate_hash, time_ns,
    accuracy_error, candidate, finding, plan, spread (a measured runner's: median_ns, q1_ns,
    q3_ns, iqr_ns, min_ns, max_ns, number, repeats, warmup)}, baseline {...}, speedup, front [{candidate_hash,
    time_ns, accuracy_error}], kernels (kernel_table)."""
    best = best_trial(trials)
    base = next((t for t in trials if t.seq == 0), None)

    def brief(t: Trial | None) -> dict[str, Any] | None:
        if t is None:
            return None
        return {
            "candidate_hash": t.candidate_hash,
            "time_ns": t.time_ns,
            "accuracy_error": t.accuracy_error,
            "candidate": t.candidate,
            "finding": t.finding,
            "seq": t.seq,
            **({"spread": t.trace_summary["measure"]} if "measure" in t.trace_summary else {}),
        }

    speedup = base.time_ns / best.time_ns if base and best and base.time_ns and best.time_ns else None
    return {
        "schema": "perf.autotune",
        "version": 1,
        "model": space.model,
        "accel": space.accel,
        "precision": space.precision,
        "space_size": space.size,
        "dimensions": len(space.dimensions),
        "trials": len(trials),
        "failed": sum(not t.ok for t in trials),
        "baseline": brief(base),
        "best": {**(brief(best) or {}), "plan": plan} if best else None,
        "speedup": speedup,
        "front": [
            {"candidate_hash": t.candidate_hash, "time_ns": t.time_ns, "accuracy_error": t.accuracy_error}
            for t in front(trials)
        ],
        "kernels": kernel_table(space, trials),
        "failures": [{"candidate_hash": t.candidate_hash, "failure": t.failure} for t in trials if not t.ok][:20],
    }


def best_so_far(trials: list[Trial]) -> dict[str, list[tuple[int, int]]]:
    """Per strategy, the best time (ns) after each of its trials: [(trials, best_ns)], its
    trials being those it proposed, with the baseline (seq 0) first for every strategy; a
    strategy's curve starts at its first passed trial."""
    base = next((t for t in trials if t.seq == 0), None)
    out: dict[str, list[tuple[int, int]]] = {}
    for s in dict.fromkeys(t.strategy for t in trials):
        mine = [t for t in trials if t.strategy == s and t.seq != 0]
        best, curve = None, []
        for n, t in enumerate(([base] if base else []) + mine, start=1):
            if t.ok and (best is None or t.time_ns < best):  # type: ignore[operator]
                best = t.time_ns
            if best is not None:
                curve.append((n, best))
        out[s] = curve
    return out


def trials_document(path: Any) -> dict[str, Any]:
    """What the dashboard's Autotune page shows of the trials database at `path` (read-only):
    {path, studies: [{model, hardware, runner, workload_hash, space_size, dimensions, trials
    [Trial.to_dict], curves {strategy: [(trials, best_ns)]}, summary (summary() of the study)}]}."""
    from profiler.autotune.db import TrialDB

    db = TrialDB.read_only(path)
    try:
        studies = []
        for study, space_doc in db.studies():
            trials = db.trials(study)
            space = Space.from_dict(space_doc)
            studies.append(
                {
                    "model": study.model,
                    "hardware": study.hardware,
                    "runner": study.runner,
                    "workload_hash": study.workload_hash,
                    "space_size": space.size,
                    "dimensions": len(space.dimensions),
                    "trials": [t.to_dict() for t in trials],
                    "curves": best_so_far(trials),
                    "summary": summary(space, trials),
                }
            )
    finally:
        db.close()
    return {"path": str(path), "studies": studies}
