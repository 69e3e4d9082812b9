"""`perf counters`: hardware counters of kernel launches (Nsight Compute, rocprof, CUPTI) as
measured FLOPs by precision, bytes by memory level and a measured roofline."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from profiler.cli.common import MaxBytes, app, one_line_errors


@app.command()
def counters(
    path: Annotated[
        Path,
        typer.Argument(
            help="Counter file or folder: ncu --csv output, a rocprof-compute workload folder (pmc_perf.csv), "
            "a rocprofv3 counter_collection.csv, or a Kineto trace with CUPTI counters."
        ),
    ],
    json: Annotated[bool, typer.Option("--json", help="Write the perf.counters JSON document to stdout.")] = False,
    hardware: Annotated[
        str | None,
        typer.Option(help="Ceilings of this spec (preset name or YAML); default: the device the file names."),
    ] = None,
    top: Annotated[int, typer.Option(min=1, help="How many kernels to list (text).")] = 20,
    max_bytes: MaxBytes = None,
) -> None:
    """Measured FLOPs by precision, bytes per memory level, utilisation and a measured roofline per kernel launch,
    from hardware counters."""
    from profiler.api import counters_report, load_counters

    with one_line_errors(path):
        report = counters_report(load_counters(path, max_bytes), hardware=hardware)
        if json:
            from profiler.render.counters import counters_json

            out = counters_json(report)
            sys.stdout.buffer.write(out)
            sys.stdout.flush()
            return
        from profiler.render import console
        from profiler.render.counters import render_counters

        render_counters(report, console(), top)
