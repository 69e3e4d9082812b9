"""`perf diff --numerics MODEL --candidate BACKEND[:PRECISION]` and `perf gate --accuracy BUDGET
MODEL --candidate ...`: the modes `perf diff` and `perf gate` dispatch to (their own options
stay with them; this file holds what the two numerical modes do)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from profiler.cli.common import fail, one_line_errors


def _report(
    model: str,
    candidate: str | None,
    inputs: list[str],
    inputs_file: Path | None,
    calibration: Path | None,
    threshold: float | None,
    metric: str | None = None,
):  # -> NumericsReport
    from profiler.api import NUMERICS_THRESHOLD, numerics_diff

    if not candidate:
        fail(
            "give the candidate to compare with eager fp32: --candidate onnxruntime[:fp32|fp16|int8|int8-qnn], "
            "qnn-sim[:int8-qnn], inductor|eager[:fp32|bf16|fp16] or accelerator[:bf16|...][@PRESET]"
        )
    with one_line_errors(calibration or inputs_file or Path(model)):
        return numerics_diff(
            model,
            inputs,
            candidate,
            threshold=NUMERICS_THRESHOLD if threshold is None else threshold,
            inputs_file=inputs_file,
            calibration=calibration,
            metric=metric,
        )


def diff_numerics(
    model: str,
    candidate: str | None,
    inputs: list[str],
    inputs_file: Path | None,
    calibration: Path | None,
    threshold: float | None,
    as_json: bool,
) -> None:
    """Print the per-layer comparison (text, or perf.numerics JSON)."""
    report = _report(model, candidate, inputs, inputs_file, calibration, threshold)
    if as_json:
        from profiler.render.numerics import numerics_json

        sys.stdout.buffer.write(numerics_json(report))
        return
    from profiler.render import console
    from profiler.render.numerics import render_numerics

    render_numerics(report, console())


def gate_accuracy(
    budget: float,
    model: str,
    candidate: str | None,
    inputs: list[str],
    inputs_file: Path | None,
    calibration: Path | None,
    threshold: float | None,
    as_json: bool,
    metric: str | None = None,
) -> None:
    """Exit 1 when the candidate's output rel_error (or the user's `metric`) exceeds `budget`,
    naming the first diverging layer."""
    if not budget >= 0 and not metric:
        fail(f"--accuracy {budget}: the budget is a normwise relative error >= 0, e.g. 0.05")
    report = _report(model, candidate, inputs, inputs_file, calibration, threshold, metric)
    name, value = report.metric or ("output rel_error", report.output.rel_error)
    passed = value <= budget
    if as_json:
        from profiler.render.numerics import accuracy_gate_json

        sys.stdout.buffer.write(accuracy_gate_json(report, budget, passed))
    else:
        from profiler.render import console
        from profiler.render.numerics import render_numerics

        out = console()
        render_numerics(report, out)
        f = report.first_diverging
        where = f"; first diverging layer: {f.name} ({f.op})" if f else ""
        verdict = "PASS" if passed else "FAIL"
        out.print(
            f"{verdict}: {name} {value:.3g} against the budget {budget:g}{where}",
            markup=False,
        )
    if not passed:
        f = report.first_diverging
        print(
            f"perf: accuracy gate failed: {name} {value:.3g} > {budget:g}"
            + (f"; first diverging layer: {f.name} ({f.op})" if f else "; no single layer crosses the threshold"),
            file=sys.stderr,
        )
        raise typer.Exit(1)
