"""`perf simulate --gemm MxNxK --array RxC --dataflow os|ws|is [--json]`: the cycles of one GEMM on
one systolic array (SCALE-Sim's closed forms, accelerator/sim/timing.py), with `--accel PRESET
[--dtype D]` also on all cores of one chip (accelerator/sim/kernel.py); `perf simulate --list
[--json]`: the built-in workloads and the accelerator presets.

`perf simulate MODEL`, running a compiled program, waits for the compiler's scheduled programs
(issue 12): until then it says so in one line, exit 2. Registered on the CLI by `register(app)`."""

from __future__ import annotations

import sys
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
    except ImportError:  # the workloads are torch modules: without torch, none
        workloads = []
    return {"workloads": workloads, "presets": api.accel_presets()}


def register(app: typer.Typer) -> None:
    @app.command("simulate")
    def simulate_cmd(
        model: Annotated[
            str, typer.Argument(help="A workload or MODULE:FACTORY (needs the compiler's scheduling).")
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
        json: Annotated[bool, typer.Option("--json", help="Write the result as JSON.")] = False,
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
                print("presets:   " + ", ".join(doc["presets"]))
            return
        if model:
            fail(
                f"{model}: simulating a model needs the compiler's scheduled programs (issue 12), not built yet; "
                "use --gemm MxNxK --array RxC --dataflow os|ws|is"
            )
        from pathlib import Path

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
