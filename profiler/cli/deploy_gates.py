"""`perf gate --latency BASELINE MODEL --candidate ...` and `perf gate --config gates.toml`: the
modes `perf gate` dispatches to (docs/deploy.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from profiler.cli.common import fail, one_line_errors


def gate_latency(
    baseline: Path,
    model: str,
    candidate: str | None,
    inputs: list[str],
    repeats: int,
    steps: int,
    max_regression: float,
    tolerance: float | None,
    calibration: Path | None,
    keep: Path | None,
    as_json: bool,
) -> None:
    """Exit 1 when the candidate's latency per inference regressed against BASELINE."""
    from profiler.api.deploy_gates import latency_gate
    from profiler.render.deploy_gates import latency_json, latency_line

    if not candidate:
        fail("give the candidate to profile: --candidate onnxruntime[:PRECISION] or qnn-sim[:PRECISION]")
        return
    with one_line_errors(baseline):
        result = latency_gate(
            [baseline],
            model,
            inputs,
            candidate,
            repeats=repeats,
            steps=steps,
            max_regression=max_regression,
            tolerance=tolerance,
            calibration=calibration,
            keep=keep,
        )
    if as_json:
        sys.stdout.buffer.write(latency_json(result))
    else:
        from profiler.render import console
        from profiler.render.compare import render_gate

        out = console()
        out.print(result.gate.method, markup=False)
        render_gate(
            list(result.gate.verdicts),
            result.gate.max_regression if result.gate.statistical else result.gate.tolerance,
            out,
        )
        out.print(latency_line(result), markup=False)
    if not result.passed:
        print(f"perf: latency gate failed: {latency_line(result)}", file=sys.stderr)
        raise typer.Exit(1)


def gate_config(config: Path, as_json: bool) -> None:
    """Run the pipeline file's gates; exit 1 when one fails."""
    from profiler.api.deploy_pipeline import run_pipeline
    from profiler.render.deploy_gates import latency_line, pipeline_json

    with one_line_errors(config):
        result = run_pipeline(config)
    lines = []
    if result.accuracy is not None:
        report, budget, passed = result.accuracy
        f = report.first_diverging
        where = f"; first diverging layer: {f.name} ({f.op})" if f else ""
        lines.append(
            f"{'PASS' if passed else 'FAIL'}: accuracy: output rel_error {report.output.rel_error:.3g} "
            f"against the budget {budget:g}{where}"
        )
    if result.latency is not None:
        lines.append(f"{latency_line(result.latency)}")
    if as_json:
        sys.stdout.buffer.write(pipeline_json(result))
    else:
        from profiler.render import console

        out = console()
        for stage, s in result.seconds.items():
            out.print(f"{stage}: {s:.1f} s", markup=False)
        for line in lines:
            out.print(line, markup=False)
        out.print(f"{'PASS' if result.passed else 'FAIL'}: {config}", markup=False)
    if not result.passed:
        print(
            f"perf: gate pipeline {config} failed: " + "; ".join(x for x in lines if x.startswith("FAIL")),
            file=sys.stderr,
        )
        raise typer.Exit(1)


def gate_split(
    budget: float,
    model: str,
    candidate: str | None,
    inputs: list[str],
    trials: int,
    strategy: str | None,
    db: Path,
    calibration: Path | None,
    as_json: bool,
) -> None:
    """Search per-layer plans; print the trials, the front and the best; exit 1 when none meets the budget."""
    from profiler.cli.deploy_split import split_search
    from profiler.render.deploy_gates import split_json, split_table

    if not candidate:
        fail("give the int8 candidate to split: --candidate onnxruntime:int8 or qnn-sim:int8-qnn")
        return
    with one_line_errors(Path(model)):
        result = split_search(
            model, inputs, candidate, budget, db, trials=trials, strategy=strategy or "", calibration=calibration
        )
    if as_json:
        sys.stdout.buffer.write(split_json(result))
    else:
        from profiler.render import console

        split_table(result, console())
    if result.best is None:
        print(f"perf: no plan of {len(result.trials)} tried meets the budget rel_error <= {budget:g}", file=sys.stderr)
        raise typer.Exit(1)
