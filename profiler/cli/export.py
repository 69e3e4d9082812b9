"""`perf export`: a trace written for ui.perfetto.dev (Perfetto protobuf or Chrome JSON)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from profiler.cli.common import Force, MaxBytes, NoCache, app, one_line_errors
from profiler.model.errors import InputError, printable


@app.command()
def export(
    trace: Annotated[
        Path, typer.Argument(help="Trace file (.json, .json.gz, .pftrace) or a directory of per-rank files.")
    ],
    output: Annotated[
        Path,
        typer.Option(
            "-o",
            "--output",
            help="Where to write: .pftrace / .perfetto-trace (Perfetto protobuf) or .json (Chrome JSON); "
            ".gz compresses.",
        ),
    ],
    hardware: Annotated[str | None, typer.Option(help="Floor every device on this spec (preset name or YAML).")] = None,
    analysis: Annotated[
        bool, typer.Option(help="Attach the analysis (bound, efficiency, FLOPs, bytes) to the slices.")
    ] = True,
    force: Force = False,
    max_bytes: MaxBytes = None,
    no_cache: NoCache = False,
) -> None:
    """Write a trace for ui.perfetto.dev: tracks per rank, device and stream/thread, the analysis on every slice, \
counters and launch flows.
    The output is written whole or not at all; never over the input, over an existing file only with --force."""
    from profiler.api import write_chrome_json, write_perfetto
    from profiler.api import analyze as run_analysis
    from profiler.api import load_trace
    from profiler.model.files import check_writable

    name = output.name.removesuffix(".gz")
    with one_line_errors(output):  # before loading: a refused output costs nothing
        check_writable(output, force=force, inputs=[trace])
    with one_line_errors(trace):
        t = load_trace(trace, max_bytes=max_bytes, cache=not no_cache)
        units = run_analysis(t, top=None, hardware=hardware, sections=("roofline",)).units if analysis else None
    with one_line_errors(output):
        if name.endswith(".json"):
            paths = write_chrome_json(t, output, units, force=force, inputs=[trace])
        elif name.endswith((".pftrace", ".perfetto-trace", ".perfetto", ".pb")):
            paths = [write_perfetto(t, output, units, force=force, inputs=[trace])]
        else:
            raise InputError(
                output,
                "unknown output format: name it .pftrace or .perfetto-trace (Perfetto) or .json (Chrome JSON), "
                ".gz optional",
            )
    for p in paths:
        print(
            printable(
                f"wrote {p} ({len(t.events):,} events, {len(t.flows):,} flows, {len(t.counters):,} counter samples)"
            )
        )
