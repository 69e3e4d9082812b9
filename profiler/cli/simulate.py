"""`perf simulate --gemm MxNxK --array RxC --dataflow os|ws|is [--json]`: the cycles of one GEMM on
one systolic array (SCALE-Sim's closed forms, accelerator/sim/timing.py), with `--accel PRESET
[--dtype D]` also on all cores of one chip (accelerator/sim/kernel.py); `perf simulate --list
[--json]`: the built-in workloads and the accelerator presets.

`perf simulate MODEL --accel PRESET [--batch B --prompt P --decode N] [--precision P]
[--precision-override MODULE=POLICY]... [--chips C] [--plan PLAN] [--tiles] [-o TRACE] [--force] [--json]
[--progress]`:
with --prompt, LLM serving (profiler/cli/simulate_serving.py); otherwise: compile MODEL (a
workload or pkg.module:factory, as `perf compile`; with `--plan`, the fusion plan and tiles of a
plan file, as `perf compile --plan`; `perf autotune --plan-out` writes one), run its scheduled
kernels on the simulated accelerator (accelerator/sim/run.py), print the time by limiter and the
`perf analyze` verdict of the simulated trace, and write the trace to TRACE (.json, .json.gz;
.perfetto-trace / .pftrace as Perfetto). Registered on the CLI by `register(app)`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from profiler.cli.common import app


def _emit(doc: dict) -> None:
    import orjson

    sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")


def _listing() -> dict:
    from profiler import api

    try:
        workloads = sorted(api.accel_workloads)
        serving = api.accel_serving_workloads()
    except ImportError:  # the workloads are torch modules: without torch, none
        workloads, serving = [], []
    return {"workloads": workloads, "serving": serving, "presets": api.accel_presets()}


def _write_trace(path: Path, doc: dict, force: bool) -> Path:
    """The simulated trace to `path`: Chrome JSON (gzip for .gz), or Perfetto by extension."""
    import gzip
    import tempfile

    import orjson

    from profiler import api
    from profiler.model.files import write_atomic

    data = orjson.dumps(doc)
    if path.name.endswith((".perfetto-trace", ".pftrace")):
        with tempfile.TemporaryDirectory() as tmp:
            raw = Path(tmp) / "sim.json"
            raw.write_bytes(data)
            api.write_perfetto(api.load_trace(raw), path, force=force)
        return path
    return write_atomic(path, gzip.compress(data) if path.name.endswith(".gz") else data, force=force)


def _is_saved_program(model: str) -> bool:
    """MODEL names a file `perf compile -o` wrote (.json / .json.gz), not a workload or factory."""
    return model.endswith((".json", ".json.gz")) and Path(model).is_file()


def _simulate_model(
    model: str,
    accel: str,
    precision: str,
    chips: int,
    out: Path | None,
    force: bool,
    json: bool,
    plan: Path | None = None,
    overrides: list[str] | None = None,
    tiles: bool = False,
) -> None:
    """Compile, simulate, print the summary and the analysis of the simulated trace (module docstring)."""
    import tempfile
    import time

    from profiler import api
    from profiler.cli.accel_compile import _model_and_inputs
    from profiler.cli.common import one_line_errors, require_torch

    require_torch("simulate")
    with one_line_errors(Path(model)):
        t0 = time.perf_counter()
        if _is_saved_program(model):  # what `perf compile -o` wrote: no compile, its own hardware
            saved = api.load_program(Path(model))
            hw = api.load_accel(accel or saved.hardware_source or saved.hardware)
            program, precision = saved.program, saved.precision
        else:
            from profiler.model.errors import InputError

            hw = api.load_accel(accel)
            per_module = {}
            for item in overrides or []:
                module, sep, policy = item.partition("=")
                if not sep or not module or not policy:
                    raise InputError(None, f"--precision-override {item}: expected MODULE=POLICY, e.g. lm_head=fp32")
                per_module[module] = policy
            fusion_plan = api.accel_load_plan(plan) if plan is not None else None
            m, xs = _model_and_inputs(model, [])
            program = api.compile_model(
                m, xs, hw, precision, chips=chips, plan=fusion_plan, precision_overrides=per_module
            ).program
        compile_s = time.perf_counter() - t0
        simulate = api.accel_simulate  # imported here, not inside the timed call
        import gc

        gc.collect()
        gc.freeze()  # the compiled program's objects live until exit: no full collection rescans them mid-run
        t0 = time.perf_counter()
        run = simulate(program, hw)
        sim_s = time.perf_counter() - t0
        doc = api.accel_sim_document(run, tiles)
        summary = api.accel_sim_summary(run)
        if out is not None:
            _write_trace(out, doc, force)
        if json:
            _emit(summary)
            return
        n = len(run.kernels)
        print(
            f"{model} on {hw.name} x {run.chips} chip(s), {precision}: {n} kernels, "
            f"{summary['total_ns'] / 1e3:,.3f} us simulated "
            f"(compile or load {compile_s:.2f} s, simulation {sim_s:.3f} s, {n / max(sim_s, 1e-9):,.0f} kernels/s)"
        )
        total = sum(summary["by_limiter"].values()) or 1
        for lim, ns in sorted(summary["by_limiter"].items(), key=lambda kv: -kv[1]):
            print(f"    {lim:<16}{ns / 1e3:>12,.3f} us  {ns / total:6.1%}")
        if out is not None:
            print(f"trace: {out}")
        with tempfile.TemporaryDirectory() as tmp:
            raw = out if out is not None and out.name.endswith((".json", ".json.gz")) else Path(tmp) / "sim.json"
            if raw != out:
                import orjson

                raw.write_bytes(orjson.dumps(doc))
            result = api.analyze(api.load_trace(raw))
        from profiler.render import console
        from profiler.render.text import render_short

        print("analysis of the simulated trace (perf analyze):")
        render_short(result, console())


def register(app: typer.Typer) -> None:
    @app.command("simulate")
    def simulate_cmd(
        model: Annotated[
            str,
            typer.Argument(
                help="A workload (perf simulate --list) or MODULE:FACTORY to compile and simulate, or a program "
                "`perf compile -o` saved (.json, .json.gz; --accel defaults to its own)."
            ),
        ] = "",
        gemm: Annotated[
            str, typer.Option("--gemm", help="Simulate one GEMM: MxNxK (M output rows, N columns, K reduction).")
        ] = "",
        array: Annotated[str, typer.Option("--array", help="RxC of the systolic array (with --gemm).")] = "",
        dataflow: Annotated[str, typer.Option("--dataflow", help="os, ws or is (with --gemm).")] = "",
        accel: Annotated[
            str, typer.Option("--accel", help="With --gemm: also the GEMM on a whole chip of this preset or YAML.")
        ] = "",
        dtype: Annotated[
            str, typer.Option("--dtype", help="With --gemm --accel: bf16, fp16, fp8, int8, fp32.")
        ] = "bf16",
        list_: Annotated[bool, typer.Option("--list", help="Name the built-in workloads and presets.")] = False,
        precision: Annotated[str, typer.Option("--precision", help="With MODEL: fp32, bf16, int8 or fp8.")] = "fp32",
        chips: Annotated[int, typer.Option("--chips", help="With MODEL: tensor-parallel over N chips.")] = 1,
        plan: Annotated[
            Path | None, typer.Option("--plan", help="With MODEL: a fusion plan (JSON/YAML), as perf compile --plan.")
        ] = None,
        override: Annotated[
            list[str], typer.Option("--precision-override", help="With MODEL: MODULE=POLICY for one layer.")
        ] = [],  # noqa: B006
        output: Annotated[
            Path | None, typer.Option("-o", "--output", help="With MODEL: write the simulated trace here.")
        ] = None,
        force: Annotated[bool, typer.Option("--force", help="Overwrite the -o file.")] = False,
        json: Annotated[bool, typer.Option("--json", help="Write the result as JSON.")] = False,
        batch: Annotated[
            int | None, typer.Option("--batch", help="With --prompt: sequences served at once (default 1).")
        ] = None,
        prompt: Annotated[
            int | None,
            typer.Option("--prompt", help="Serve MODEL (a decoder): a prefill step of batch x PROMPT tokens."),
        ] = None,
        decode: Annotated[
            int | None, typer.Option("--decode", help="With --prompt: then N decode steps over the growing KV cache.")
        ] = None,
        tiles: Annotated[
            bool,
            typer.Option(
                "--tiles", help="With MODEL: write each core's tile loads, computes and stores in the trace (large)."
            ),
        ] = False,
        progress: Annotated[
            bool | None,
            typer.Option(
                "--progress/--no-progress", help="A progress bar on stderr (default: when stderr is a terminal)."
            ),
        ] = None,
    ) -> None:
        """Simulate on the accelerator: one GEMM on one systolic array (--gemm), or list what there is."""
        from profiler.cli.common import fail

        if sum(map(bool, (model, gemm, list_))) != 1:
            fail("give one of MODEL, --gemm MxNxK or --list")
        if list_:
            doc = _listing()
            if json:
                _emit(doc)
            else:
                print("workloads: " + (", ".join(doc["workloads"]) or "none (they need torch: pip install '.[accel]')"))
                print("serving:   " + (", ".join(doc["serving"]) or "none") + " (--prompt P --decode N)")
                print("presets:   " + ", ".join(doc["presets"]))
            return
        if model:
            if not accel and not _is_saved_program(model):
                fail("MODEL needs --accel PRESET_OR_YAML (presets: " + ", ".join(_listing()["presets"]) + ")")
            if chips < 1:
                fail(f"--chips {chips}: expected a positive number of chips")
            if prompt is not None or decode is not None or batch is not None:
                if prompt is None:
                    fail("--batch and --decode serve a decoder: give --prompt P too")
                if plan is not None or override:
                    fail("--plan and --precision-override apply to one compile, not yet to serving (--prompt)")
                if _is_saved_program(model):
                    fail(
                        "--prompt/--decode compile a prefill and a decode program: give a workload, not a saved program"
                    )
                from profiler.cli.simulate_serving import simulate_serving

                simulate_serving(
                    model, accel, precision.strip().lower(), chips, 1 if batch is None else batch, prompt,
                    0 if decode is None else decode, output, force, json, progress, tiles,
                )  # fmt: skip
                return
            if plan is not None and _is_saved_program(model):
                fail("--plan applies when compiling MODEL, not to a saved program")
            _simulate_model(model, accel, precision.strip().lower(), chips, output, force, json, plan, override, tiles)
            return
        from profiler import api
        from profiler.cli.common import one_line_errors

        hw = None
        if accel:
            with one_line_errors(Path(accel)):
                hw = api.load_accel(accel)
            array = array or f"{hw.matrix.rows}x{hw.matrix.cols}"
            dataflow = dataflow or hw.matrix.dataflow
        if not array or not dataflow:
            fail("--gemm needs --array RxC and --dataflow os|ws|is (or --accel PRESET)")
        try:
            m, n, k = api.parse_dims(gemm, 3, "--gemm")
            rows, cols = api.parse_dims(array, 2, "--array")
            doc = api.gemm_report(m, n, k, rows, cols, dataflow.strip().lower())
            if hw is not None:
                doc["chip"] = api.gemm_kernel_report(hw, m, n, k, dtype.strip().lower())
        except ValueError as e:
            fail(
                str(e)
                .replace("dataflow must", "--dataflow must")
                .replace("matrix unit has no", "matrix unit has no --dtype")
            )
        if json:
            _emit(doc)
            return
        print(f"GEMM M={m} N={n} K={k} on a {rows}x{cols} array, {doc['dataflow']} dataflow")
        print(f"compute cycles: {doc['compute_cycles']:,}  = {doc['formula']} (SCALE-Sim's closed form)")
        print(f"ideal cycles:   {doc['ideal_cycles']:,}  = ceil(M*N*K / (R*C))")
        print(f"utilisation:    {doc['utilisation']:.1%}  ({doc['folds']:,} folds)")
        if "chip" in doc:
            c = doc["chip"]
            stalls = ", ".join(f"{k} {v:,} cycles" for k, v in c["stall_cycles"].items()) or "none"
            print(
                f"on {c['accel']} ({c['cores']} cores, {c['dtype']}, N split over the cores): "
                f"{c['time_s'] * 1e6:,.2f} us, "
                f"limiter {c['limiter']}, {c['fraction_of_peak']:.1%} of the {c['peak_flops'] / 1e12:,.2f} TFLOP/s peak"
            )
            print(f"stalls beyond compute: {stalls}")


register(app)
