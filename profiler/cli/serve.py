"""`perf dashboard`: serve the Dash app on the given traces."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from profiler.cli.common import MaxBytes, app, one_line_errors


@app.command()
def dashboard(
    traces: Annotated[
        list[Path] | None, typer.Argument(help="Trace files or directories to open (more can be uploaded in the page).")
    ] = None,
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8050,
    host: Annotated[str, typer.Option(help="Address to bind; the default serves this machine only.")] = "127.0.0.1",
    max_upload_mb: Annotated[int, typer.Option(min=1, help="Largest trace the page accepts as an upload, MiB.")] = 512,
    compile_log: Annotated[
        Path | None,
        typer.Option(help="A TORCH_TRACE directory (torch.compile's structured logs) for the Compiler page."),
    ] = None,
    counters: Annotated[
        Path | None,
        typer.Option(
            help="Hardware counters (ncu --csv, rocprof-compute folder, rocprofv3 CSV) for the Counters page."
        ),
    ] = None,
    hardware: Annotated[
        str | None, typer.Option(help="Ceilings of the Counters page's roofline (preset name or YAML).")
    ] = None,
    numerics: Annotated[
        Path | None,
        typer.Option(help="A perf diff --numerics --json file (or a gate's JSON holding one) for the Numerics page."),
    ] = None,
    trials: Annotated[
        list[Path] | None,
        typer.Option("--trials", help="A trials database (perf autotune --db) for the Autotune page; repeatable."),
    ] = None,
    max_bytes: MaxBytes = None,
) -> None:
    """Serve the Dash dashboard: overview, roofline, timeline, ops, compare, memory, LLM, compiler, counters,
    numerics and autotune pages."""
    from profiler.model.files import check_regular

    paths = list(traces or [])
    for p in paths:
        if not p.is_dir():  # a FIFO or a device would block or never end the first read
            with one_line_errors(p):
                check_regular(p)
    report = None
    if compile_log is not None:
        from profiler.api import compile_report

        with one_line_errors(compile_log):  # read now: a bad log is a one-line error, not a broken page
            report = compile_report(compile_log, max_bytes=max_bytes)
    counted = None
    if counters is not None:
        from profiler.api import counters_report, load_counters

        with one_line_errors(counters):  # read now: a bad file is a one-line error, not a broken page
            counted = counters_report(load_counters(counters, max_bytes), hardware=hardware)
    diffed = None
    if numerics is not None:
        from profiler.api.deploy import read_numerics

        with one_line_errors(numerics):
            diffed = read_numerics(numerics)
    docs = []
    for db in trials or []:
        from profiler.autotune.report import trials_document

        with one_line_errors(db):  # read now, read-only: a bad database is a one-line error
            docs.append(trials_document(db))
    from dashboard.app import serve

    print(f"perf dashboard: http://{host}:{port}/ (Ctrl+C to stop)", file=sys.stderr)
    with one_line_errors(paths[0] if paths else Path(".")):
        serve(
            paths,
            host=host,
            port=port,
            upload_cap=max_upload_mb * 2**20,
            compile_report=report,
            max_bytes=max_bytes,
            counters_report=counted,
            numerics=diffed,
            trials=docs,
        )
