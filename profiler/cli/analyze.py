"""`perf analyze`: what bounds the run, then the sections asked for."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from profiler.cli.common import MaxBytes, NoCache, app, one_line_errors
from profiler.model.errors import InputError


@app.command()
def analyze(
    trace: Annotated[Path, typer.Argument(help="Trace file (.json, .json.gz) or a directory of per-rank files.")],
    top: Annotated[int, typer.Option(min=1, help="How many ops and kernels to list.")] = 15,
    rank: Annotated[int | None, typer.Option(help="Analyze only this rank.")] = None,
    json: Annotated[bool, typer.Option("--json", help="Write the versioned JSON report to stdout.")] = False,
    hardware: Annotated[
        str | None, typer.Option(help="Floor every device on this spec (preset name or YAML): what-if.")
    ] = None,
    dtype: Annotated[
        str | None,
        typer.Option(help="Re-floor GEMMs, convolutions and attention at this precision: bf16, fp8, int8 (what-if)."),
    ] = None,
    section: Annotated[
        list[str] | None,
        typer.Option(
            help="Only these sections (repeatable): verdict, summary, ops, roofline, timeline, critical_path, "
            "memory, llm, modules, advice."
        ),
    ] = None,
    full: Annotated[
        bool, typer.Option("--full", help="Every section (the default is the verdict and a short summary).")
    ] = False,
    collectives: Annotated[
        Path | None,
        typer.Option(
            help="YAML table of extra collective op/kernel names (format: analysis/collectives.yaml; "
            "default $PERF_COLLECTIVES or ~/.config/perf/collectives.yaml)."
        ),
    ] = None,
    counters: Annotated[
        Path | None,
        typer.Option(
            help="Hardware counters of the trace's kernels (ncu --csv, rocprof-compute folder, rocprofv3 CSV, "
            "Kineto CUPTI trace): joined to the kernels, measured FLOPs and bytes beside the model's."
        ),
    ] = None,
    max_bytes: MaxBytes = None,
    no_cache: NoCache = False,
) -> None:
    """What bounds the run (the verdict, first), then device busy and idle time, the wall equation and the top ops;
    --full for every section."""
    from profiler.api import analyze as run_analysis
    from profiler.api import load_trace

    with one_line_errors(trace):
        t = load_trace(trace, max_bytes=max_bytes, cache=not no_cache)
        if dtype and dtype not in ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"):
            raise InputError(None, f"--dtype {dtype}: expected one of fp32, tf32, bf16, fp16, fp8, int8, fp4")
        from profiler.api import SECTIONS

        unknown = sorted(set(section or ()) - set(SECTIONS))
        if unknown:
            raise InputError(None, f"--section {unknown[0]}: expected one of {', '.join(SECTIONS)}")
        kc = None
        if counters is not None:
            from profiler.api import load_counters

            kc = load_counters(counters, max_bytes)
        result = run_analysis(
            t,
            top=top,
            rank=rank,
            hardware=hardware,
            dtype=dtype,
            sections=tuple(section or SECTIONS),
            collectives=collectives,
            counters=kc,
        )
        if json:
            from profiler.render.json import to_json

            out = to_json(result, t.metadata)  # built whole first: a failure prints nothing
            sys.stdout.buffer.write(out)
            sys.stdout.flush()
            return
        from profiler.render import console
        from profiler.render.text import render, render_short

        out_console = console()
        if section or full:
            render(result, out_console, tuple(section or SECTIONS))
        else:
            render_short(result, out_console)
        if result.counters is not None:
            from profiler.render.counters import render_counters

            render_counters(result.counters, out_console, top)


def analyze_recorded(path: Path, *, top: int, json: bool, hardware: str | None, section: list[str] | None) -> None:
    """`perf analyze PATH` with the options `perf profile` passes on, for the trace it just wrote."""
    analyze(
        path, top=top, rank=None, json=json, hardware=hardware, dtype=None, section=section, full=False,
        collectives=None,
    )  # fmt: skip
