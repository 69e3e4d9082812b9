"""The regression gates over traces and the deployment latency gate.

- `gate_traces`: BASE runs against NEW runs with analysis.gate's noise-aware statistics (what
  `perf gate BASE NEW` prints).
- `latency_gate` (`perf gate --latency BASELINE MODEL --candidate ...`): profile the candidate
  `repeats` times (each a fresh runtime session of `steps` inferences: one run), then gate its
  wall-clock latency per inference (the '(wall)' verdict: ProfilerStep = one inference) against
  the baseline runs. With 3+ runs a side the verdict is the bootstrap test; with fewer, the
  tolerance (analysis.gate's module docstring).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profiler.model.errors import InputError

_TRACE_SUFFIXES = (".json", ".json.gz", ".pftrace", ".perfetto-trace", ".pb", ".csv")


@dataclass(frozen=True)
class TraceGate:
    """Verdicts (analysis.gate.Verdict, most regressed first), runs a side, whether the bootstrap
    test judged (3+ runs a side), the rule in words, and the limits (percent)."""

    verdicts: tuple[Any, ...]
    runs: tuple[int, int]
    statistical: bool
    method: str
    max_regression: float
    tolerance: float

    @property
    def regression(self) -> bool:
        return any(v.regression for v in self.verdicts)


@dataclass(frozen=True)
class LatencyGate:
    """`perf gate --latency`: passed unless the per-inference wall time regressed."""

    passed: bool
    wall: Any  # the '(wall)' Verdict (or '(total)' when the traces have no steps)
    gate: TraceGate
    candidate: str
    traces: tuple[str, ...]
    notes: tuple[str, ...] = field(default=())


def run_paths(path: Path) -> list[Path]:
    """The runs a gate argument names: a trace file is one run; a directory of trace files, one
    run per file; a directory of directories, one (multi-rank) run per subdirectory."""
    if not path.is_dir():
        return [path]
    subdirs = sorted(p for p in path.iterdir() if p.is_dir())
    if subdirs:
        return subdirs
    files = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(_TRACE_SUFFIXES))
    if not files:
        raise InputError(path, "no trace files (.json, .json.gz, .pftrace) in this directory")
    return files


def gate_traces(
    base: list[Path],
    new: list[Path],
    max_regression: float,
    tolerance: float | None = None,
    max_bytes: int | None = None,
    cache: bool = True,
) -> TraceGate:
    """BASE against NEW (each a list of trace files or run directories, run_paths), limits in percent."""
    from analysis.gate import MIN_RUNS, compare, samples, step_walls
    from analysis.units import units
    from profiler.api.pipeline import load_trace

    sides, runs = [], []
    for paths in (base, new):
        per_trace, walls = [], []
        for path in [r for p in paths for r in run_paths(p)]:
            t = load_trace(path, max_bytes=max_bytes, cache=cache)
            per_trace.append(units(t))
            walls.append(step_walls(t.events))
        sides.append(samples(per_trace, walls))
        runs.append(len(per_trace))
    tol = max_regression if tolerance is None else tolerance
    verdicts = compare(sides[0], sides[1], max_regression / 100, runs=(runs[0], runs[1]), tolerance=tol / 100)
    statistical = min(runs) >= MIN_RUNS
    method = (
        f"{runs[0]} and {runs[1]} runs: ratio = mean(new)/mean(base) - 1 over iterations; regression when "
        f"ratio > {max_regression:g}% and the 95% bootstrap interval's lower end > 0"
        if statistical
        else f"{runs[0]} run(s) against {runs[1]}: fewer than {MIN_RUNS} runs a side, "
        f"so the change cannot be separated from run-to-run noise; regression when ratio > the tolerance "
        f"of {tol:g}% (the interval over iterations of one run is shown, not used)"
    )
    return TraceGate(tuple(verdicts), (runs[0], runs[1]), statistical, method, max_regression, tol)


def profile_candidate(
    spec: str,
    input_specs: list[str],
    candidate: str,
    out_dir: Path,
    *,
    repeats: int = 3,
    steps: int = 10,
    calibration: Path | None = None,
) -> tuple[list[Path], tuple[str, ...]]:
    """Export and make the candidate's variant once, then profile it `repeats` times (a fresh
    session each: one run) of `steps` inferences into `out_dir/run<k>.json`."""
    from profiler.api.deploy import make_variant, parse_candidate, profile_variant

    backend, precision = parse_candidate(candidate)
    if repeats < 1 or steps < 1:
        raise InputError(None, f"--repeats {repeats} --steps {steps}: both must be at least 1")
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        cand, arrays, notes = make_variant(
            spec, input_specs, precision, Path(tmp), calibration=calibration, backend=backend
        )
        paths = [
            profile_variant(
                cand, arrays, out_dir / f"run{k}.json", backend=backend, runs=steps, label=f"--model {spec}"
            )
            for k in range(repeats)
        ]
    return paths, notes


def latency_gate(
    baseline: list[Path],
    spec: str,
    input_specs: list[str],
    candidate: str,
    *,
    repeats: int = 3,
    steps: int = 10,
    max_regression: float = 10.0,
    tolerance: float | None = None,
    calibration: Path | None = None,
    keep: Path | None = None,
) -> LatencyGate:
    """Profile the candidate (profile_candidate; its runs kept in `keep` when given, to be the next
    baseline) and gate its per-inference wall time against `baseline`'s runs (gate_traces)."""
    for b in baseline:
        if not b.exists():
            raise InputError(b, "no such baseline (a trace file or a directory of runs)")
    with tempfile.TemporaryDirectory() as tmp:
        out = keep or Path(tmp)
        paths, notes = profile_candidate(
            spec, input_specs, candidate, out, repeats=repeats, steps=steps, calibration=calibration
        )
        gate = gate_traces(baseline, paths, max_regression, tolerance)
    by_name = {v.name: v for v in gate.verdicts}
    wall = by_name.get("(wall)") or by_name.get("(total)")
    if wall is None:
        raise InputError(baseline[0], "the baseline has no time to compare (no ops or steps)")
    traces = tuple(str(p) for p in paths) if keep else ()
    return LatencyGate(not wall.regression, wall, gate, candidate, traces, notes)
