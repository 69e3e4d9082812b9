"""The `perf` command line (Typer + Rich). Results on stdout; errors on stderr.

Exit codes: 0 success, 2 bad input (one line naming the file and the problem), 1 failed gate.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from profiler.cli_usage import OneLineUsage, one_line
from profiler.model.errors import InputError, printable
from profiler.model.files import parse_size

app = typer.Typer(
    cls=OneLineUsage,
    add_completion=False,
    no_args_is_help=True,
    help="Performance profiling and bottleneck analysis for ML compilers and accelerators.",
)

#: --max-bytes: the most a command reads of one file, decompressed (profiler.model.files).
MaxBytes = Annotated[
    int | None,
    typer.Option(
        "--max-bytes",
        parser=parse_size,
        metavar="SIZE",
        help="Refuse a file larger than this once decompressed (e.g. 512M, 8G). Default: half the memory available.",
    ),
]
#: --force: replace an existing output file (never an input).
Force = Annotated[
    bool, typer.Option("--force", help="Overwrite the output file if it exists (never one of the inputs).")
]


def Console(**options):  # noqa: N802 - rich's Console, imported only when text is printed (not for --json)
    from rich.console import Console as RichConsole

    return RichConsole(**options)


def fail(problem: str, path: str | None = None) -> None:
    """Print `perf: <path>: <problem>` on stderr (one line: control characters escaped) and exit 2."""
    msg = f"{path}: {problem}" if path else problem
    print(one_line(msg), file=sys.stderr)
    raise typer.Exit(2)


def require_torch(command: str) -> None:
    """`perf profile` and `perf calibrate` run torch, an optional extra: without it, one line, exit 2."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        print(f"perf {command} needs torch: pip install 'perf-suite[profile]'", file=sys.stderr)
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
    max_bytes: MaxBytes = None,
) -> None:
    """What bounds the run (the verdict, first), then device busy and idle time, the wall equation and the top ops;
    --full for every section."""
    from profiler.api import analyze as run_analysis
    from profiler.api import load_trace

    with one_line_errors(trace):
        t = load_trace(trace, max_bytes=max_bytes)
        if dtype and dtype not in ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"):
            raise InputError(None, f"--dtype {dtype}: expected one of fp32, tf32, bf16, fp16, fp8, int8, fp4")
        from profiler.api import SECTIONS

        unknown = sorted(set(section or ()) - set(SECTIONS))
        if unknown:
            raise InputError(None, f"--section {unknown[0]}: expected one of {', '.join(SECTIONS)}")
        result = run_analysis(
            t,
            top=top,
            rank=rank,
            hardware=hardware,
            dtype=dtype,
            sections=tuple(section or SECTIONS),
            collectives=collectives,
        )
        if json:
            from profiler.render.json import to_json

            out = to_json(result, t.metadata)  # built whole first: a failure prints nothing
            sys.stdout.buffer.write(out)
            sys.stdout.flush()
            return
        from profiler.render import console
        from profiler.render.text import render, render_short

        if section or full:
            render(result, console(), tuple(section or SECTIONS))
        else:
            render_short(result, console())


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
    from profiler.model.hardware import load_spec, presets

    for name in presets():
        spec = load_spec(name)
        print(f"{name:24} {spec.kind:4} {spec.vendor}")


@hardware_app.command("show")
def hardware_show(name: Annotated[str, typer.Argument(help="A preset name or a spec YAML file.")]) -> None:
    """Show one spec: peaks, memory levels, links, minimum op time and sources."""
    from rich.table import Table

    from profiler.model.hardware import load_spec
    from profiler.model.hardware_describe import describe

    with one_line_errors(Path(name)):
        spec = load_spec(name)
        table = Table(title=spec.name, title_justify="left", show_header=False)
        table.add_column(style="bold")
        table.add_column(overflow="fold")
        for label, value in describe(spec):
            table.add_row(label, value)
        from profiler.render import console

        console().print(table)


@app.command()
def calibrate(
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the measured spec (YAML).")] = Path(
        "calibrated.yaml"
    ),
    quick: Annotated[bool, typer.Option(help="Small sizes: seconds instead of a minute, rougher figures.")] = False,
    links: Annotated[bool, typer.Option(help="Also measure gloo all_reduce between two local processes.")] = True,
    force: Force = False,
) -> None:
    """Measure this machine's ceilings (matmul FLOP/s per dtype, bandwidth, op time, link) into a spec."""
    require_torch("calibrate")
    from rich.progress import Progress

    from profiler import calibrate as cal
    from profiler.model.files import check_writable
    from profiler.model.hardware import save_spec
    from profiler.render import console

    with one_line_errors(output):  # before a minute of measuring, not after
        check_writable(output, force=force)
    # no auto-refresh: a redraw thread would compete with the measured ops for the cores
    with one_line_errors(output), Progress(console=console(stderr=True), transient=True, auto_refresh=False) as bar:
        steps = 4 + len(cal.MATRIX_DTYPES) + int(links)
        task = bar.add_task("calibrating", total=steps)

        def step(what: str) -> None:
            if what.startswith(cal.NOTE_PREFIXES):  # a figure rejected or left out: said, and kept on screen
                bar.console.print(f"perf calibrate: {what}")
                return
            bar.update(task, description=what, advance=1)
            bar.refresh()

        try:
            specs = cal.calibrate(cal.Sizes.quick() if quick else cal.Sizes(), progress=step, links=links)
        except cal.CalibrationError as e:
            fail(f"calibration rejected: {e}; nothing written (rerun on a quiet machine)", str(output))
        bar.update(task, completed=steps)
    for i, spec in enumerate(specs):
        path = output if i == 0 else output.with_name(f"{output.stem}-{spec.kind}{output.suffix}")
        with one_line_errors(path):
            save_spec(spec, path, force=force)
        print(printable(f"wrote {path} ({spec.name}); use it with --hardware {path}"))


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
        t = load_trace(trace, max_bytes=max_bytes)
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


def _busy_ns(device_time) -> int:
    """Accelerator busy time summed over devices; the CPU's on a CPU-only trace."""
    gpu = device_time[device_time["device"] != "cpu"]
    return int((gpu if len(gpu) else device_time)["busy_ns"].sum())


_TRACE_SUFFIXES = (".json", ".json.gz", ".pftrace", ".perfetto-trace", ".pb")


def _runs(path: Path) -> list[Path]:
    """The runs a gate argument names: a trace file is one run; a directory of trace files, one
    run per file; a directory of directories, one (multi-rank) run per subdirectory."""
    if not path.is_dir():
        return [path]
    subdirs = sorted(p for p in path.iterdir() if p.is_dir())
    if subdirs:
        return subdirs
    files = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(_TRACE_SUFFIXES))
    if not files:
        fail("no trace files (.json, .json.gz, .pftrace) in this directory", str(path))
    return files


@app.command()
def gate(
    base_new: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="[BASE NEW]",
            help="Baseline and new: each a trace file, a directory of repeated runs (one trace file each), "
            "or a directory of multi-rank run directories.",
        ),
    ] = None,
    base: Annotated[
        list[Path] | None, typer.Option("--base", help="Baseline trace (repeatable: several runs), instead of BASE.")
    ] = None,
    new: Annotated[
        list[Path] | None, typer.Option("--new", help="New trace (repeatable: several runs), instead of NEW.")
    ] = None,
    max_regression: Annotated[
        float, typer.Option(help="Allowed slowdown, percent (with 3+ runs a side: and beyond the noise).")
    ] = 10.0,
    tolerance: Annotated[
        float | None,
        typer.Option(
            help="With fewer than 3 runs a side: allowed slowdown, percent, judged without a noise estimate "
            "(default: --max-regression)."
        ),
    ] = None,
    json: Annotated[
        bool, typer.Option("--json", help="Write the verdicts as JSON (schema perf.gate, version 2).")
    ] = False,
    max_bytes: MaxBytes = None,
) -> None:
    """CI gate: exit 1 when NEW is slower than BASE: in wall-clock time per step, in device (or
    CPU op) time, or for any op holding 5% of it. With 3+ runs a side, slower by more than
    --max-regression AND beyond the noise (a 95% bootstrap interval); with fewer, the change cannot
    be separated from noise and is compared with --tolerance."""
    from profiler.api import GATE_MIN_RUNS as MIN_RUNS
    from profiler.api import gate_compare as compare
    from profiler.api import gate_samples as samples
    from profiler.api import step_walls, units
    from profiler.api import load_trace

    positional = list(base_new or [])
    if positional and (base or new):
        fail("give BASE NEW or --base/--new, not both")
    if positional and len(positional) != 2:
        fail(f"expected two arguments, BASE and NEW; got {len(positional)}")
    if not positional and not (base and new):
        fail("give the two traces to compare: perf gate BASE NEW (or --base A --new B)")
    given = ([positional[0]], [positional[1]]) if positional else (base, new)
    sides, runs = [], []
    for paths in given:
        per_trace, walls = [], []
        for path in [r for p in paths for r in _runs(p)]:
            with one_line_errors(path):
                t = load_trace(path, max_bytes=max_bytes)
                per_trace.append(units(t))
                walls.append(step_walls(t.events))
        sides.append(samples(per_trace, walls))
        runs.append(len(per_trace))
    tol = max_regression if tolerance is None else tolerance
    verdicts = compare(sides[0], sides[1], max_regression / 100, runs=(runs[0], runs[1]), tolerance=tol / 100)
    statistical = min(runs) >= MIN_RUNS
    method = (
        f"{runs[0]} and {runs[1]} runs: ratio = mean(new)/mean(base) - 1 over iterations; regression when "
        f"ratio > {max_regression:g}% and the 95% bootstrap interval's lower end > 0"
        if statistical
        else f"{runs[0]} run(s) against {runs[1]}: fewer than {MIN_RUNS} runs a side, "
        f"so the change cannot be separated from run-to-run noise; regression when ratio > the tolerance "
        f"of {tol:g}% (the interval over iterations of one run is shown, not used)"
    )
    failed = [v for v in verdicts if v.regression]
    if json:
        from profiler.render.json import gate_json

        sys.stdout.buffer.write(gate_json(verdicts, max_regression, tol, runs, statistical, method))
    else:
        from profiler.render import console
        from profiler.render.compare import render_gate

        out = console()
        out.print(method, markup=False)
        render_gate(verdicts, max_regression if statistical else tol, out)
    if failed:
        raise typer.Exit(1)


# Options stop at the script: `perf profile -o t.json.gz train.py --lr 0.1 -o x` gives the script
# `--lr 0.1 -o x` (as python -m cProfile does).
@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False}
)
def profile(
    ctx: typer.Context,
    script: Annotated[
        Path | None, typer.Argument(help="Python script to run in this process; what follows it is its own arguments.")
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            help="Trace to write (.json.gz; .json for plain). Default: perf-<script or factory>.json.gz here.",
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="Profile a model instead: MODULE:FACTORY (or file.py:FACTORY), a callable returning an nn.Module."
        ),
    ] = None,
    input: Annotated[
        list[str] | None,
        typer.Option(
            "--input", help="Model input SHAPE[:DTYPE[:HIGH]], e.g. 32x256 or 1x128:int64 (repeatable, in order)."
        ),
    ] = None,
    dtype: Annotated[
        str | None, typer.Option(help="Model weights and float inputs: fp32 (default), bf16, fp16, fp64.")
    ] = None,
    compile_: Annotated[
        bool,
        typer.Option("--compile", help="Model: torch.compile it (compiles during warm-up, outside the recording)."),
    ] = False,
    steps: Annotated[int | None, typer.Option(min=1, help="Model: recorded steps (default 3).")] = None,
    backward: Annotated[bool, typer.Option(help="Model: also run backward of the first output's sum.")] = False,
    warmup: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Steps before the recorded ones (default 1). Model: run unprofiled. "
            "Script: with --active, traced and discarded.",
        ),
    ] = None,
    wait: Annotated[
        int, typer.Option(min=0, help="Script, with --active: marked steps to skip before the warm-up.")
    ] = 0,
    active: Annotated[
        int | None,
        typer.Option(min=1, help="Script: record this many steps marked by profiler.step() (default: the whole run)."),
    ] = None,
    with_stack: Annotated[
        bool, typer.Option(help="Record Python stacks of ops (larger trace, more overhead).")
    ] = False,
    with_modules: Annotated[bool, typer.Option(help="Record the nn.Module hierarchy of ops.")] = False,
    top: Annotated[int, typer.Option(min=1, help="How many ops and kernels to list.")] = 15,
    json: Annotated[
        bool,
        typer.Option("--json", help="Write the perf.analyze JSON report to stdout (the script's prints go to stderr)."),
    ] = False,
    hardware: Annotated[str | None, typer.Option(help="Floor every device on this spec (preset name or YAML).")] = None,
    section: Annotated[
        list[str] | None,
        typer.Option(
            help="Only these sections (repeatable): summary, ops, roofline, timeline, critical_path, memory, llm, "
            "modules, advice."
        ),
    ] = None,
    compare_compile: Annotated[
        bool,
        typer.Option(
            "--compare-compile",
            help="Model: run it eager and torch.compiled and show, per fused kernel, the ops it replaced, "
            "time before and after, and its bound.",
        ),
    ] = False,
    force: Force = False,
) -> None:
    """Run a script (or --model factory) under torch.profiler, write the trace, then analyze it as \
`perf analyze` does."""
    require_torch("profile")
    if compare_compile:
        _compare_compile(model, input or [], dtype, steps, backward, hardware, json)
        return
    with one_line_errors(script or Path(model or "profile")):
        from profiler.api import run_model, run_script
        from profiler.model.files import check_writable

        if script and str(script).startswith("-"):  # ignore_unknown_options let a typo through as the script
            raise InputError(
                None, f"no such option: {script} (see perf profile --help; the script's own options go after it)"
            )
        if bool(model) == bool(script):
            raise InputError(None, "give a script to run or --model MODULE:FACTORY (one of them)")
        if model:
            if ctx.args or active is not None or wait:
                raise InputError(
                    None, f"--model takes --steps and --warmup, not {' '.join(ctx.args) or '--active/--wait'}"
                )
            out = check_writable(output or Path(f"perf-{model.rpartition(':')[2]}.json.gz"), force=force)
            session = run_model(
                model,
                input or [],
                out,
                dtype=dtype or "fp32",
                compile=compile_,
                steps=steps or 3,
                warmup=1 if warmup is None else warmup,
                backward=backward,
                with_stack=with_stack,
                with_modules=with_modules,
            )
        else:
            if input or dtype or compile_ or steps or backward:
                raise InputError(
                    script,
                    "--input, --dtype, --compile, --steps and --backward go with --model; a script marks its own steps",
                )
            out = check_writable(output or Path(f"perf-{script.stem}.json.gz"), force=force, inputs=[script])
            session = run_script(
                script,
                list(ctx.args),
                out,
                active=active,
                wait=wait,
                warmup=1 if warmup is None else warmup,
                with_stack=with_stack,
                with_modules=with_modules,
                stdout_to_stderr=json,
            )
    short = (
        ""
        if session.complete
        else f" (the run ended after {session.marks} step marks, before all {session.steps} recorded steps)"
    )
    print(one_line(f"wrote {session.path}{short}"), file=sys.stderr)
    analyze(
        session.path,
        top=top,
        rank=None,
        json=json,
        hardware=hardware,
        dtype=None,
        section=section,
        full=False,
        collectives=None,
    )
    if session.compile is not None and not json:
        from profiler.render import console
        from profiler.render.compile import render_summary

        console().print(render_summary(session.compile))


def _compare_compile(
    model: str | None,
    inputs: list[str],
    dtype: str | None,
    steps: int | None,
    backward: bool,
    hardware: str | None,
    as_json: bool,
) -> None:
    """`perf profile --model M --compare-compile`: eager vs compiled per fused kernel."""
    with one_line_errors(Path(model or "profile")):
        if not model:
            raise InputError(None, "--compare-compile goes with --model MODULE:FACTORY")
        import torch

        from profiler.api import compare_compile
        from profiler.api import prepare_model as prepare

        module, xs = prepare(model, inputs, dtype or "fp32", backward)
        grad = torch.enable_grad() if backward else torch.no_grad()
        with grad:
            result = compare_compile(module, tuple(xs), steps or 3, hardware=hardware, backward=backward)
    if as_json:
        from profiler.render.json import compare_compile_json

        sys.stdout.buffer.write(compare_compile_json(result))
        return
    from profiler.render import console
    from profiler.render.compile import render_compare

    console().print(render_compare(result))
    for m in result.messages:
        print(f"perf: {m}", file=sys.stderr)


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
    max_bytes: MaxBytes = None,
) -> None:
    """Serve the Dash dashboard: overview, roofline, timeline, ops, compare, memory, LLM and compiler pages."""
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
    from dashboard.app import serve

    print(f"perf dashboard: http://{host}:{port}/ (Ctrl+C to stop)", file=sys.stderr)
    with one_line_errors(paths[0] if paths else Path(".")):
        serve(paths, host=host, port=port, upload_cap=max_upload_mb * 2**20, compile_report=report, max_bytes=max_bytes)


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
            import orjson

            from collectors.torch_compile.report import report_doc

            sys.stdout.buffer.write(orjson.dumps(report_doc(report), option=orjson.OPT_INDENT_2) + b"\n")
        else:
            from profiler.render import console
            from profiler.render.compile import render_report

            console().print(render_report(report))
    for line in report.problems.lines():  # unreadable lines are counted, not fatal
        print(one_line(f"{logdir}: {line}"), file=sys.stderr)


from profiler.cli_compile import register as _register_compile  # noqa: E402  (perf compile: its own file)

_register_compile(app)
