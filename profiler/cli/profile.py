"""`perf profile`: run a script or a model factory under torch.profiler, then analyze the trace;
--compare-compile runs a model eager and compiled."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from profiler.cli.analyze import analyze_recorded
from profiler.cli.common import Force, app, fail, one_line_errors, require_torch
from profiler.cli_usage import one_line
from profiler.model.errors import InputError


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
    counters: Annotated[
        bool,
        typer.Option(
            "--counters",
            help="Also count CPU events with Linux perf stat (hardware where allowed, software otherwise), "
            "written beside the trace as .perfstat.csv; skipped when the perf tool is absent.",
        ),
    ] = False,
    iree_flag: Annotated[
        list[str] | None,
        typer.Option("--iree-flag", help="--backend iree: one more iree-compile flag (repeatable)."),
    ] = None,
    force: Force = False,
    backend: Annotated[
        str,
        typer.Option(
            help="eager (torch.profiler, the default; a script or a model), iree (export the model with "
            "iree-turbine, compile it with iree-compile for this CPU and time each dispatch; docs/iree.md) or "
            "onnxruntime (export, --precision, ONNX Runtime CPU profiler), qnn-sim (export, --precision, "
            "the QNN HTP x86 simulator's per-node cycles), tensorrt (trtexec's per-layer profile; needs TensorRT "
            "and an NVIDIA GPU) or inductor (torch.compile, as --compile; docs/deploy.md)."
        ),
    ] = "eager",
    precision: Annotated[
        str | None,
        typer.Option(
            help="--backend onnxruntime|qnn-sim: fp32, fp16, int8 (QDQ) or int8-qnn (QNN HTP QDQ config); "
            "default fp32 on onnxruntime, int8-qnn on qnn-sim."
        ),
    ] = None,
    calibration: Annotated[
        Path | None, typer.Option(help="--backend onnxruntime|qnn-sim, int8: calibration batches (.pt/.npy).")
    ] = None,
) -> None:
    """Run a script (or --model factory) under torch.profiler, write the trace, then analyze it as \
`perf analyze` does."""
    require_torch("profile")
    if script is not None and ":" in str(script) and ctx.args and not script.exists():
        # `perf profile MODULE:FACTORY --backend iree ...`: a model, not a script; its options
        # were taken as the script's, so read them again with the model named by --model
        from profiler.cli.common import main

        main(["profile", *ctx.args, "--model", str(script)])
        return
    if backend == "iree" or iree_flag:
        from profiler.cli.profile_iree import profile_iree_cli

        profile_iree_cli(
            backend,
            model or (str(script) if script else None),
            input or [],
            dtype,
            iree_flag or [],
            output,
            hardware,
            json,
            force,
            steps,
        )
        return
    if backend == "inductor":  # torch.compile's default backend: the model path with --compile
        if not model:
            fail("--backend inductor profiles a model: give --model MODULE:FACTORY and --input SHAPE")
        backend, compile_ = "eager", True
    if backend != "eager":
        from profiler.cli.profile_backend import profile_backend

        profile_backend(
            backend,
            model,
            input or [],
            output,
            precision,
            steps,
            calibration,
            force,
            top=top,
            json=json,
            hardware=hardware,
            section=section,
        )
        return
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
            stat, cpu = _cpu_counters(counters, out, force)
            with cpu:
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
            assert script is not None  # one of the two, checked above
            if input or dtype or compile_ or steps or backward:
                raise InputError(
                    script,
                    "--input, --dtype, --compile, --steps and --backward go with --model; a script marks its own steps",
                )
            out = check_writable(output or Path(f"perf-{script.stem}.json.gz"), force=force, inputs=[script])
            stat, cpu = _cpu_counters(counters, out, force)
            with cpu:
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
    analyze_recorded(session.path, top=top, json=json, hardware=hardware, section=section)
    if session.compile is not None and not json:
        from profiler.render import console
        from profiler.render.compile import render_summary

        console().print(render_summary(session.compile))
    if stat is not None:
        _show_cpu_counters(stat, json)


def _cpu_counters(wanted: bool, trace_out: Path, force: bool):  # -> (Path | None, context manager)
    """perf profile --counters: where Linux perf stat writes, and the context that runs it; with
    no perf tool on PATH, a note on stderr and nothing recorded."""
    from contextlib import nullcontext

    from profiler.api import linux_perf, record_cpu_counters
    from profiler.model.files import check_writable

    if not wanted:
        return None, nullcontext()
    if linux_perf() is None:
        print("perf: --counters skipped: Linux perf (the perf-events tool) is not on PATH", file=sys.stderr)
        return None, nullcontext()
    name = trace_out.name.removesuffix(".gz").removesuffix(".json")
    stat = check_writable(trace_out.with_name(f"{name}.perfstat.csv"), force=force)
    return stat, record_cpu_counters(stat)


def _show_cpu_counters(stat: Path, as_json: bool) -> None:
    """The CPU counters perf stat wrote: a table (text), or where they are (--json: stdout holds the report)."""
    print(one_line(f"wrote {stat} (CPU counters: perf counters {stat})"), file=sys.stderr)
    if as_json:
        return
    from profiler.api import counters_report, load_counters
    from profiler.render import console
    from profiler.render.counters import render_counters

    with one_line_errors(stat):
        render_counters(counters_report(load_counters(stat)), console())


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
