"""`perf compile-report`: torch.compile's own story from its structured log."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from profiler.cli.common import MaxBytes, app, one_line_errors
from profiler.cli_usage import one_line


@app.command("compile-report")
def compile_report_cmd(
    logdir: Annotated[
        Path,
        typer.Argument(help="A TORCH_TRACE directory (or one of its .log files): torch.compile's structured logs."),
    ],
    json: Annotated[
        bool, typer.Option("--json", help="Write the tables as JSON (schema perf.compile_report, version 1).")
    ] = False,
    max_bytes: MaxBytes = None,
) -> None:
    """torch.compile's own story from its structured log: phases, graph breaks (reason, file:line),
    recompiles (failed guard), cache hits and misses, and the fusion map (kernel = ATen ops, from source)."""
    from profiler.api import compile_report

    with one_line_errors(logdir):
        report = compile_report(logdir, max_bytes=max_bytes)
        if json:
            from profiler.render.json import compile_report_json

            sys.stdout.buffer.write(compile_report_json(report))
        else:
            from profiler.render import console
            from profiler.render.compile import render_report

            console().print(render_report(report))
    for line in report.problems.lines():  # unreadable lines are counted, not fatal
        print(one_line(f"{logdir}: {line}"), file=sys.stderr)
