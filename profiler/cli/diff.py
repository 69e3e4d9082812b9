"""`perf diff`: two traces compared, setup first, then ops and kernels."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from profiler.cli.common import MaxBytes, app, one_line_errors


@app.command()
def diff(
    base: Annotated[Path, typer.Argument(help="Trace A (the baseline): file or directory.")],
    new: Annotated[Path, typer.Argument(help="Trace B: file or directory.")],
    top: Annotated[int, typer.Option(min=1, help="How many changes to list.")] = 20,
    threshold: Annotated[float, typer.Option(help="Ignore time changes below this percent of A's time.")] = 0.0,
    json: Annotated[
        bool, typer.Option("--json", help="Write the setup and the changes as JSON (schema perf.diff, version 2).")
    ] = False,
    max_bytes: MaxBytes = None,
) -> None:
    """Compare two traces: first what differs in the setup (hardware, ranks, dtypes, versions, shapes; a
    comparison across hardware or rank counts is labelled not like-for-like), then ops and kernels
    matched by name and input shapes; count, time, bound changes."""
    from profiler.api import diff as diff_tables
    from profiler.api import op_times
    from profiler.api import analyze as run_analysis
    from profiler.api import compare_setup, load_trace, setup

    sides, setups = [], []
    for path in (base, new):
        with one_line_errors(path):
            t = load_trace(path, max_bytes=max_bytes)
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
