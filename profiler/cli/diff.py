"""`perf diff`: two traces compared, setup first, then ops and kernels."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from profiler.cli.common import MaxBytes, NoCache, app, one_line_errors


@app.command()
def diff(
    base: Annotated[Path | None, typer.Argument(help="Trace A (the baseline): file or directory.")] = None,
    new: Annotated[Path | None, typer.Argument(help="Trace B: file or directory.")] = None,
    top: Annotated[int, typer.Option(min=1, help="How many changes to list.")] = 20,
    threshold: Annotated[
        float | None,
        typer.Option(
            help="Traces: ignore time changes below this percent of A's time (default 0). --numerics: a layer "
            "diverges when its normwise relative error exceeds this (default 0.1, SQNR below 20 dB)."
        ),
    ] = None,
    numerics: Annotated[
        str | None,
        typer.Option(
            help="Compare a model's numbers instead of two traces: MODULE:FACTORY, eager fp32 against --candidate, "
            "layer by layer (docs/deploy.md)."
        ),
    ] = None,
    candidate: Annotated[
        str | None,
        typer.Option(
            help="--numerics: BACKEND[:PRECISION]: onnxruntime or qnn-sim (fp32, fp16, int8, int8-qnn, a plan .json), "
            "inductor or eager (fp32, bf16, fp16), accelerator[:fp32|bf16|int8|fp8][@PRESET]."
        ),
    ] = None,
    input: Annotated[
        list[str] | None, typer.Option("--input", help="--numerics: model input SHAPE[:DTYPE] (repeatable).")
    ] = None,
    inputs: Annotated[
        Path | None, typer.Option(help="--numerics: compare on the first batch of this .pt/.npy instead.")
    ] = None,
    calibration: Annotated[
        Path | None,
        typer.Option(help="--numerics, int8: calibration batches (.pt/.npy); default 8 random normal batches."),
    ] = None,
    json: Annotated[
        bool, typer.Option("--json", help="Write the setup and the changes as JSON (schema perf.diff, version 2).")
    ] = False,
    max_bytes: MaxBytes = None,
    no_cache: NoCache = False,
) -> None:
    """Compare two traces: first what differs in the setup (hardware, ranks, dtypes, versions, shapes; a
    comparison across hardware or rank counts is labelled not like-for-like), then ops and kernels
    matched by name and input shapes; count, time, bound changes. With --numerics MODEL: eager fp32
    against a candidate, per layer (rel_error, max_abs_error, cosine, SQNR) and the first diverging layer."""
    if numerics is not None:
        from profiler.cli.numerics import diff_numerics

        diff_numerics(numerics, candidate, input or [], inputs, calibration, threshold, json)
        return
    if base is None or new is None:
        from profiler.cli.common import fail

        fail("give the two traces to compare: perf diff A B (or --numerics MODEL --candidate BACKEND)")
        return
    threshold = threshold or 0.0
    from profiler.api import diff as diff_tables
    from profiler.api import op_times
    from profiler.api import analyze as run_analysis
    from profiler.api import compare_setup, load_trace, setup

    sides, setups = [], []
    for path in (base, new):
        with one_line_errors(path):
            t = load_trace(path, max_bytes=max_bytes, cache=not no_cache)
            a = run_analysis(t, top=None, sections=("summary", "ops", "roofline"))
            sides.append(a)
            setups.append(setup(a.overview, t.metadata, a.by_dtype, a.top_ops))
    with one_line_errors(new):
        same_setup = compare_setup(*setups)
        changes = diff_tables(
            op_times(sides[0].top_ops, sides[0].top_kernels),
            op_times(sides[1].top_ops, sides[1].top_kernels),
            threshold / 100,
        )
        busy = [_busy_ns(s.device_time) for s in sides]
        if json:
            from profiler.render.json import diff_json

            sys.stdout.buffer.write(diff_json(str(base), str(new), busy, changes, same_setup))
            return
        from profiler.render import console
        from profiler.render.compare import render_diff

        from profiler.render.compare import render_setup

        out = console()
        render_setup(same_setup, out)
        render_diff(str(base), str(new), busy, changes.head(top), len(changes), out)


def _busy_ns(device_time) -> int:
    """Accelerator busy time summed over devices; the CPU's on a CPU-only trace."""
    gpu = device_time[device_time["device"] != "cpu"]
    return int((gpu if len(gpu) else device_time)["busy_ns"].sum())
