"""`perf analyze`: what bounds the run, then the sections asked for."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from profiler.cli.common import MaxBytes, NoCache, app, one_line_errors
from profiler.model.errors import InputError
from profiler.model.files import describe_size, parse_size


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
            "memory, llm, modules, advice, ranks."
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
    engine: Annotated[
        str,
        typer.Option(
            help="local (default): read the ranks here; dask: read and analyze each rank file of a directory "
            "on a Dask cluster (pip install .[scale])."
        ),
    ] = "local",
    scheduler: Annotated[
        str | None, typer.Option(help="--engine dask: a running cluster's scheduler address (default: a LocalCluster).")
    ] = None,
    workers: Annotated[
        int | None, typer.Option(min=1, help="--engine dask: worker processes of the LocalCluster (default 2).")
    ] = None,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict", help="--engine dask: a rank file that cannot be read is an error (exit 2), not a warning."
        ),
    ] = False,
    no_cache: NoCache = False,
    memory_limit: Annotated[
        int | None,
        typer.Option(
            "--memory-limit",
            parser=parse_size,
            metavar="SIZE",
            help="Peak memory to stay under (e.g. 2G). A trace whose in-memory analysis would need more "
            "(about 3x its decompressed size) is streamed in chunks through Parquet: summary and top "
            "ops/kernels only. Default: three quarters of the memory available (then the default --max-bytes "
            "still applies; with --memory-limit given, only an explicit --max-bytes does).",
        ),
    ] = None,
) -> None:
    """What bounds the run (the verdict, first), then device busy and idle time, the wall equation and the top ops;
    --full for every section."""
    from profiler.api import analyze as run_analysis
    from profiler.api import load_trace

    with one_line_errors(trace):
        if (
            counters is None
            and engine == "local"
            and _stream(trace, memory_limit, rank, json, top, max_bytes, not no_cache)
        ):
            return
        instances = None
        if engine == "dask":
            t, instances = _load_on_dask(trace, scheduler, workers, max_bytes, strict)
        elif engine != "local":
            raise InputError(None, f"--engine {engine}: expected local or dask")
        else:
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
            instances=instances,
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


def _load_on_dask(trace: Path, scheduler: str | None, workers: int | None, max_bytes: int | None, strict: bool):
    """The directory's ranks read on Dask (profiler.api.load_ranks); unreadable rank files are
    warnings on stderr, or with --strict the error."""
    from profiler.api import load_ranks
    from profiler.model.errors import printable

    if not trace.is_dir():
        raise InputError(trace, "--engine dask reads a directory of per-rank files")
    got = load_ranks(trace, scheduler=scheduler, workers=workers, max_bytes=max_bytes)
    for path, why in got.skipped:
        if strict:
            raise InputError(path, f"{why} (--strict)")
        print(printable(f"perf: warning: {path}: {why}; its rank is left out"), file=sys.stderr)
    return got.trace, got.instances


def _stream(
    trace: Path, limit: int | None, rank: int | None, json: bool, top: int, max_bytes: int | None, cache: bool
) -> bool:
    """The streamed analysis (profiler.api.stream) when the trace would not fit in `limit`: report it,
    return True; else False (the in-memory path runs)."""
    from profiler import api

    asked = limit is not None
    limit = limit if limit is not None else api.default_memory_limit()
    if not api.should_stream(trace, limit):
        return False
    if max_bytes is None and not asked:  # the default reading limit guards a run that did not ask to stream
        from profiler.model.files import default_max_bytes

        max_bytes = default_max_bytes()
    if rank is not None:
        raise InputError(None, "--rank: not available when the trace is streamed (larger than --memory-limit)")
    result, metadata = api.analyze_streamed(trace, memory_limit=limit, top=top, max_bytes=max_bytes, cache=cache)
    if json:
        from profiler.render.json import to_json

        sys.stdout.buffer.write(to_json(result, metadata))
        sys.stdout.flush()
        return True
    from profiler.render import console
    from profiler.render.text import render

    out = console()
    out.print(
        f"Streamed: the trace needs more than --memory-limit {describe_size(limit)} in memory; "
        "computed: trace, device time, top ops (host time) and kernels. Not computed:"
    )
    for what, why in api.STREAM_SKIPS.items():
        out.print(f"  {what}: {why}")
    from dataclasses import replace

    host_only = result.top_ops.assign(device_ns=0, share=0.0)  # the table of host time, no device columns
    render(replace(result, top_ops=host_only), out, ("summary", "ops"))
    return True


def analyze_recorded(path: Path, *, top: int, json: bool, hardware: str | None, section: list[str] | None) -> None:
    """`perf analyze PATH` with the options `perf profile` passes on, for the trace it just wrote."""
    analyze(
        path, top=top, rank=None, json=json, hardware=hardware, dtype=None, section=section, full=False,
        collectives=None,
    )  # fmt: skip
