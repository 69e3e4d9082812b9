"""`perf gate`: the CI regression gate over repeated runs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from profiler.cli.common import MaxBytes, NoCache, app, fail, one_line_errors


_TRACE_SUFFIXES = (".json", ".json.gz", ".pftrace", ".perfetto-trace", ".pb")


def _runs(path: Path) -> list[Path]:
    """The runs a gate argument names: a trace file is one run; a directory of trace files, one
    run per file; a directory of directories, one (multi-rank) run per subdirectory."""
    if not path.is_dir():
        return [path]
    subdirs = sorted(p for p in path.iterdir() if p.is_dir())
    if subdirs:
        return subdirs
    files = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(_TRACE_SUFFIXES))
    if not files:
        fail("no trace files (.json, .json.gz, .pftrace) in this directory", str(path))
    return files


@app.command()
def gate(
    base_new: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="[BASE NEW]",
            help="Baseline and new: each a trace file, a directory of repeated runs (one trace file each), "
            "or a directory of multi-rank run directories.",
        ),
    ] = None,
    base: Annotated[
        list[Path] | None, typer.Option("--base", help="Baseline trace (repeatable: several runs), instead of BASE.")
    ] = None,
    new: Annotated[
        list[Path] | None, typer.Option("--new", help="New trace (repeatable: several runs), instead of NEW.")
    ] = None,
    max_regression: Annotated[
        float, typer.Option(help="Allowed slowdown, percent (with 3+ runs a side: and beyond the noise).")
    ] = 10.0,
    tolerance: Annotated[
        float | None,
        typer.Option(
            help="With fewer than 3 runs a side: allowed slowdown, percent, judged without a noise estimate "
            "(default: --max-regression)."
        ),
    ] = None,
    json: Annotated[
        bool, typer.Option("--json", help="Write the verdicts as JSON (schema perf.gate, version 2).")
    ] = False,
    max_bytes: MaxBytes = None,
    no_cache: NoCache = False,
    accuracy: Annotated[
        float | None,
        typer.Option(
            help="Accuracy gate instead: MODEL (MODULE:FACTORY) as the one argument; exit 1 when --candidate's "
            "output error (normwise relative, against eager fp32) exceeds this budget (docs/deploy.md)."
        ),
    ] = None,
    candidate: Annotated[
        str | None, typer.Option(help="--accuracy: BACKEND[:PRECISION], e.g. onnxruntime:int8.")
    ] = None,
    input: Annotated[list[str] | None, typer.Option("--input", help="--accuracy: model input SHAPE[:DTYPE].")] = None,
    inputs: Annotated[Path | None, typer.Option(help="--accuracy: inputs, the first batch of a .pt/.npy.")] = None,
    calibration: Annotated[Path | None, typer.Option(help="--accuracy, int8: calibration batches (.pt/.npy).")] = None,
    threshold: Annotated[
        float | None, typer.Option(help="--accuracy: rel_error past which a layer diverges (default 0.1).")
    ] = None,
) -> None:
    """CI gate: exit 1 when NEW is slower than BASE: in wall-clock time per step, in device (or
    CPU op) time, or for any op holding 5% of it. With 3+ runs a side, slower by more than
    --max-regression AND beyond the noise (a 95% bootstrap interval); with fewer, the change cannot
    be separated from noise and is compared with --tolerance."""
    if accuracy is not None:
        from profiler.cli.numerics import gate_accuracy

        if len(base_new or []) != 1 or base or new:
            fail("--accuracy BUDGET takes one MODEL (MODULE:FACTORY) and --candidate, not traces")
        gate_accuracy(accuracy, str((base_new or [])[0]), candidate, input or [], inputs, calibration, threshold, json)
        return
    from profiler.api import GATE_MIN_RUNS as MIN_RUNS
    from profiler.api import gate_compare as compare
    from profiler.api import gate_samples as samples
    from profiler.api import step_walls, units
    from profiler.api import load_trace

    positional = list(base_new or [])
    if positional and (base or new):
        fail("give BASE NEW or --base/--new, not both")
    if positional and len(positional) != 2:
        fail(f"expected two arguments, BASE and NEW; got {len(positional)}")
    if not positional and not (base and new):
        fail("give the two traces to compare: perf gate BASE NEW (or --base A --new B)")
    given = ([positional[0]], [positional[1]]) if positional else (base, new)
    sides, runs = [], []
    for paths in given:
        per_trace, walls = [], []
        for path in [r for p in paths for r in _runs(p)]:
            with one_line_errors(path):
                t = load_trace(path, max_bytes=max_bytes, cache=not no_cache)
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
    failed = [v for v in verdicts if v.regression]
    if json:
        from profiler.render.json import gate_json

        sys.stdout.buffer.write(gate_json(verdicts, max_regression, tol, runs, statistical, method))
    else:
        from profiler.render import console
        from profiler.render.compare import render_gate

        out = console()
        out.print(method, markup=False)
        render_gate(verdicts, max_regression if statistical else tol, out)
    if failed:
        raise typer.Exit(1)
