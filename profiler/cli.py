"""The `perf` command line (Typer + Rich). Results on stdout; errors on stderr.

Exit codes: 0 success, 2 bad input (one line naming the file and the problem), 1 failed gate.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Iterator, Optional

import typer
from rich.console import Console

from profiler.errors import InputError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Performance profiling and bottleneck analysis for ML compilers and accelerators.")


def fail(problem: str, path: str | None = None) -> None:
    """Print `perf: <path>: <problem>` on stderr and exit 2."""
    from profiler.redact import redact_text

    msg = f"{path}: {problem}" if path else problem
    print(f"perf: {redact_text(msg)}", file=sys.stderr)
    raise typer.Exit(2)


def _print_version(value: bool) -> None:
    if value:
        from profiler import __version__

        print(__version__)
        raise typer.Exit(0)


@contextmanager
def one_line_errors(path: Path) -> Iterator[None]:
    """Bad input -> `perf: <path>: <problem>`, exit 2. Our own bugs too: one line, never a
    traceback (set PERF_DEBUG=1 to see it)."""
    try:
        yield
    except InputError as e:
        fail(e.problem, e.path)
    except MemoryError:
        fail("out of memory while reading", str(path))
    except (typer.Exit, KeyboardInterrupt, BrokenPipeError):
        raise
    except Exception as e:
        if os.environ.get("PERF_DEBUG"):
            raise
        fail(f"internal error ({type(e).__name__}: {e}); rerun with PERF_DEBUG=1 and report it", str(path))


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """perf: where the time goes in ML workloads, and why."""


@app.command()
def analyze(
    trace: Annotated[Path, typer.Argument(help="Trace file (.json, .json.gz) or a directory of per-rank files.")],
    top: Annotated[int, typer.Option(min=1, help="How many ops and kernels to list.")] = 15,
    rank: Annotated[Optional[int], typer.Option(help="Analyze only this rank.")] = None,
    json: Annotated[bool, typer.Option("--json", help="Write the versioned JSON report to stdout.")] = False,
    hardware: Annotated[Optional[str], typer.Option(help="Floor every device on this spec (preset name or YAML): what-if.")] = None,
    dtype: Annotated[Optional[str], typer.Option(help="Re-floor GEMMs, convolutions and attention at this precision: bf16, fp8, int8 (what-if).")] = None,
    section: Annotated[Optional[list[str]], typer.Option(help="Only these sections (repeatable): summary, ops, roofline, timeline, critical_path, memory, llm, modules, advice.")] = None,
) -> None:
    """Summarise a trace: what it is, device busy and idle time, the top ops and kernels."""
    from profiler.facade import analyze as run_analysis
    from profiler.facade import load_trace

    with one_line_errors(trace):
        t = load_trace(trace)
        if dtype and dtype not in ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"):
            raise InputError(None, f"--dtype {dtype}: expected one of fp32, tf32, bf16, fp16, fp8, int8, fp4")
        from profiler.facade import SECTIONS

        unknown = sorted(set(section or ()) - set(SECTIONS))
        if unknown:
            raise InputError(None, f"--section {unknown[0]}: expected one of {', '.join(SECTIONS)}")
        result = run_analysis(t, top=top, rank=rank, hardware=hardware, dtype=dtype, sections=tuple(section or SECTIONS))
        if json:
            from profiler.report import to_json

            out = to_json(result, t.metadata)  # built whole first: a failure prints nothing
            sys.stdout.buffer.write(out)
            sys.stdout.flush()
            return
        from profiler.render import render

        render(result, Console(soft_wrap=False, emoji=False), tuple(section or SECTIONS))  # ":fire:" in a name stays text


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `perf` console script and `python -m profiler`."""
    try:
        app(args=argv, prog_name="perf", standalone_mode=True)
    except SystemExit as e:
        if argv is None or e.code not in (0, None):
            raise


hardware_app = typer.Typer(no_args_is_help=True, help="Hardware specs: the ceilings the roofline is drawn against.")
app.add_typer(hardware_app, name="hardware")


@hardware_app.command("list")
def hardware_list() -> None:
    """List the bundled presets."""
    from profiler.hardware import load_spec, presets

    for name in presets():
        spec = load_spec(name)
        print(f"{name:24} {spec.kind:4} {spec.vendor}")


@hardware_app.command("show")
def hardware_show(name: Annotated[str, typer.Argument(help="A preset name or a spec YAML file.")]) -> None:
    """Show one spec: peaks, memory levels, links, minimum op time and sources."""
    from rich.table import Table

    from profiler.hardware import load_spec
    from profiler.hardware_describe import describe

    with one_line_errors(Path(name)):
        spec = load_spec(name)
        table = Table(title=spec.name, title_justify="left", show_header=False)
        table.add_column(style="bold")
        table.add_column(overflow="fold")
        for label, value in describe(spec):
            table.add_row(label, value)
        Console(emoji=False).print(table)


@app.command()
def calibrate(
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the measured spec (YAML).")] = Path("calibrated.yaml"),
    quick: Annotated[bool, typer.Option(help="Small sizes: seconds instead of a minute, rougher figures.")] = False,
    links: Annotated[bool, typer.Option(help="Also measure gloo all_reduce between two local processes.")] = True,
) -> None:
    """Measure this machine's ceilings (matmul FLOP/s per dtype, bandwidth, op time, link) into a spec."""
    from rich.progress import Progress

    from profiler import calibrate as cal
    from profiler.hardware import save_spec

    with one_line_errors(output), Progress(console=Console(stderr=True), transient=True) as bar:
        steps = 4 + len(cal.MATRIX_DTYPES) + int(links)
        task = bar.add_task("calibrating", total=steps)

        def step(what: str) -> None:
            bar.update(task, description=what, advance=1)

        specs = cal.calibrate(cal.Sizes.quick() if quick else cal.Sizes(), progress=step, links=links)
        bar.update(task, completed=steps)
    for i, spec in enumerate(specs):
        path = output if i == 0 else output.with_name(f"{output.stem}-{spec.kind}{output.suffix}")
        save_spec(spec, path)
        print(f"wrote {path} ({spec.name}); use it with --hardware {path}")


@app.command()
def diff(
    base: Annotated[Path, typer.Argument(help="Trace A (the baseline): file or directory.")],
    new: Annotated[Path, typer.Argument(help="Trace B: file or directory.")],
    top: Annotated[int, typer.Option(min=1, help="How many changes to list.")] = 20,
    threshold: Annotated[float, typer.Option(help="Ignore time changes below this percent of A's time.")] = 0.0,
    json: Annotated[bool, typer.Option("--json", help="Write the changes as JSON (schema perf.diff, version 1).")] = False,
) -> None:
    """Compare two traces: ops and kernels matched by name and input shapes; count, time, bound changes."""
    from analysis.diff import diff as diff_tables
    from analysis.diff import op_times
    from profiler.facade import analyze as run_analysis
    from profiler.facade import load_trace

    sides = []
    for path in (base, new):
        with one_line_errors(path):
            a = run_analysis(load_trace(path), top=None, sections=("summary", "ops", "roofline"))
            sides.append(a)
    with one_line_errors(new):
        changes = diff_tables(op_times(sides[0].top_ops, sides[0].top_kernels),
                              op_times(sides[1].top_ops, sides[1].top_kernels), threshold / 100)
        busy = [_busy_ns(s.device_time) for s in sides]
        if json:
            from profiler.report import diff_json

            sys.stdout.buffer.write(diff_json(str(base), str(new), busy, changes))
            return
        from profiler.render import render_diff

        render_diff(str(base), str(new), busy, changes.head(top), len(changes), Console(soft_wrap=False, emoji=False))


def _busy_ns(device_time) -> int:
    """Accelerator busy time summed over devices; the CPU's on a CPU-only trace."""
    gpu = device_time[device_time["device"] != "cpu"]
    return int((gpu if len(gpu) else device_time)["busy_ns"].sum())


@app.command()
def gate(
    base: Annotated[list[Path], typer.Option("--base", help="Baseline trace (repeatable: several runs).")],
    new: Annotated[list[Path], typer.Option("--new", help="New trace (repeatable: several runs).")],
    max_regression: Annotated[float, typer.Option(help="Allowed slowdown, percent.")] = 10.0,
    json: Annotated[bool, typer.Option("--json", help="Write the verdicts as JSON (schema perf.gate, version 1).")] = False,
) -> None:
    """CI gate: exit 1 when NEW is slower than BASE by more than --max-regression AND beyond the noise
    (a 95% bootstrap interval over iterations), for the total or any op holding 5% of the time (smaller ones are mostly noise)."""
    from analysis.gate import compare, samples
    from analysis.units import units
    from profiler.facade import load_trace

    sides = []
    for paths in (base, new):
        per_trace = []
        for path in paths:
            with one_line_errors(path):
                per_trace.append(units(load_trace(path)))
        sides.append(samples(per_trace))
    verdicts = compare(sides[0], sides[1], max_regression / 100)
    failed = [v for v in verdicts if v.regression]
    if json:
        import orjson

        from profiler.redact import redact

        doc = {"schema": "perf.gate", "schema_version": 1, "max_regression_pct": max_regression,
               "test": "ratio = mean(new)/mean(base) - 1 over iterations; regression when ratio > threshold "
                       "and the 95% bootstrap interval's lower end > 0",
               "regression": bool(failed), "verdicts": [v.__dict__ | {"samples": list(v.samples)} for v in verdicts]}
        sys.stdout.buffer.write(orjson.dumps(redact(doc), option=orjson.OPT_INDENT_2) + b"\n")
    else:
        from profiler.render import render_gate

        render_gate(verdicts, max_regression, Console(soft_wrap=False, emoji=False))
    if failed:
        raise typer.Exit(1)
