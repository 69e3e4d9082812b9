"""`perf gate`: the CI regression gate over repeated runs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from profiler.cli.common import MaxBytes, NoCache, app, fail, one_line_errors


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
    metric: Annotated[
        str | None,
        typer.Option(
            help="--accuracy: a task metric MODULE:FN, fn(reference output, candidate output) -> float (numpy "
            "arrays), gated against the budget instead of the output's rel_error."
        ),
    ] = None,
    latency: Annotated[
        Path | None,
        typer.Option(
            metavar="BASELINE",
            help="Latency gate instead: MODEL as the one argument; profile --candidate --repeats times and exit 1 "
            "when its latency per inference exceeds BASELINE's (a trace file or directory of runs) by more than "
            "--max-regression (docs/deploy.md).",
        ),
    ] = None,
    repeats: Annotated[int, typer.Option(help="--latency: candidate runs (fresh sessions); 3+ for the bootstrap.")] = 3,
    steps: Annotated[int, typer.Option(help="--latency: inferences per candidate run.")] = 10,
    keep: Annotated[
        Path | None, typer.Option(help="--latency: keep the candidate's runs in this directory (the next baseline).")
    ] = None,
    split: Annotated[
        float | None,
        typer.Option(
            metavar="BUDGET",
            help="Graph splitting instead: MODEL as the one argument; search which layers of --candidate (int8) to "
            "keep "
            "in fp32 so the output rel_error stays within BUDGET at the lowest latency; exit 1 when no plan meets it.",
        ),
    ] = None,
    trials: Annotated[int, typer.Option(help="--split: plans to try (the all-int8 baseline included).")] = 16,
    strategy: Annotated[
        str | None, typer.Option(help="--split: exhaustive, random or tpe (default: exhaustive when all plans fit).")
    ] = None,
    db: Annotated[
        Path, typer.Option("--db", help="--split: the SQLite trials database (the autotune loop's; resumes).")
    ] = Path("split-trials.sqlite"),
    config: Annotated[
        Path | None,
        typer.Option(help="Run a pipeline file (TOML): export, precision, profile and both gates (docs/deploy.md)."),
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
        gate_accuracy(
            accuracy, str((base_new or [])[0]), candidate, input or [], inputs, calibration, threshold, json, metric
        )
        return
    if config is not None:
        from profiler.cli.deploy_gates import gate_config

        if base_new or base or new:
            fail("--config FILE takes no other arguments: the file names the model, candidate and gates")
        gate_config(config, json)
        return
    if split is not None:
        from profiler.cli.deploy_gates import gate_split

        if len(base_new or []) != 1 or base or new:
            fail("--split BUDGET takes one MODEL (MODULE:FACTORY) and --candidate, not traces")
        gate_split(split, str((base_new or [])[0]), candidate, input or [], trials, strategy, db, calibration, json)
        return
    if latency is not None:
        from profiler.cli.deploy_gates import gate_latency

        if len(base_new or []) != 1 or base or new:
            fail("--latency BASELINE takes one MODEL (MODULE:FACTORY) and --candidate, not traces")
        model = str((base_new or [])[0])
        gate_latency(
            latency, model, candidate, input or [], repeats, steps, max_regression, tolerance, calibration, keep, json
        )
        return
    from profiler.api.deploy_gates import gate_traces

    positional = list(base_new or [])
    if positional and (base or new):
        fail("give BASE NEW or --base/--new, not both")
    if positional and len(positional) != 2:
        fail(f"expected two arguments, BASE and NEW; got {len(positional)}")
    if not positional and not (base and new):
        fail("give the two traces to compare: perf gate BASE NEW (or --base A --new B)")
    base_runs, new_runs = ([positional[0]], [positional[1]]) if positional else (list(base or []), list(new or []))
    with one_line_errors(base_runs[0]):
        g = gate_traces(base_runs, new_runs, max_regression, tolerance, max_bytes, cache=not no_cache)
    verdicts, runs, tol, statistical, method = list(g.verdicts), list(g.runs), g.tolerance, g.statistical, g.method
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
